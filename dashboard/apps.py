from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        # Pages with live numbers register their tickers on import; a worker may serve a
        # page's websocket before any request has loaded the URLconf (and the views).
        from dashboard.views import overview  # noqa: F401
