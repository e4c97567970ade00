"""The `manage.py a2a` command line: one module per area, each adding its subcommands."""
