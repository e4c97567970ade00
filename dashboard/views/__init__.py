"""Dashboard views, one module per screen: thin — parse, call a selector or service, render."""
