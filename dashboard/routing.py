"""The dashboard's websocket URL. Browsers authenticate with their session; the handshake is
refused from any origin but this site's (ALLOWED_HOSTS) and for anyone not logged in."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import path

from dashboard.consumers import DashboardConsumer

websocket_urlpatterns = [
    path(
        "ws/dashboard/",
        AllowedHostsOriginValidator(AuthMiddlewareStack(DashboardConsumer.as_asgi())),
    )
]
