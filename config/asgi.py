"""The ASGI entry point: one process serves the dashboard, the A2A endpoints and websockets.

HTTP requests under /a2a/, /.well-known/, /discover, /metrics and /receipts/ go straight to the hub's
Starlette app (the a2a-sdk routes), outside Django's middleware, which would halve their
throughput. /static/ is served from disk. Everything else is Django. Inbox agents hold a
websocket at /ws/agents/<agent>/.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from a2a_core.inbox.consumer import InboxConsumer  # noqa: E402
from a2a_core.protocol.asgi import HubHttpRouter, StartedFirst, lifespan_app  # noqa: E402
from dashboard import routing as dashboard_routing  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": HubHttpRouter(django_asgi_app),
        # Inbox agents authenticate with their bearer token; browsers with their session,
        # from this site's pages only (dashboard.routing).
        "websocket": StartedFirst(
            URLRouter(
                [
                    path("ws/agents/<slug:slug>/", InboxConsumer.as_asgi()),
                    *dashboard_routing.websocket_urlpatterns,
                ]
            )
        ),
        "lifespan": lifespan_app,
    }
)
