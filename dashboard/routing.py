"""The dashboard's websocket URL. Browsers authenticate with their session; the handshake is
refused from any origin but this site's own (see `dashboard.origins`) and for anyone not
logged in."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from django.urls import path

from dashboard.consumers import DashboardConsumer
from dashboard.origins import SameOriginValidator

websocket_urlpatterns = [
    path(
        "ws/dashboard/",
        SameOriginValidator(AuthMiddlewareStack(DashboardConsumer.as_asgi())),
    )
]
