from django.apps import AppConfig


class A2ACoreConfig(AppConfig):
    name = "a2a_core"
    verbose_name = "A2A Hub"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from a2a_core.services.ledger_hooks import connect

        connect()
