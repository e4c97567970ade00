from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard"
    # Pages with live numbers register their tickers when their views are imported: the
    # websocket consumer imports them (dashboard/consumers.py), so a worker serving a page's
    # websocket before any request loaded the URLconf has them, and a manage.py command
    # that serves nothing does not pay for them (0.3 s of its start).
