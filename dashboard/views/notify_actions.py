"""Deciding where people are told: the page an email's Approve/Reject link opens (a confirm
page, behind that user's login), and the callback of Slack's buttons (verified with Slack's
signing secret, no session). Both call the same decision services as the inbox."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from a2a_core.errors import Conflict, HubError, NotFound, PermissionDenied
from a2a_core.models import Escalation
from a2a_core.services import notify_actions as service
from dashboard.http import HtmxHttpRequest, actor

# What a decision is called on the page.
DONE = {"approve": "Approved", "reject": "Rejected"}


def _page(request: HttpRequest, status: int = 200, **context: Any) -> HttpResponse:
    return TemplateResponse(request, "dashboard/notify_act.html", context, status=status)


@require_http_methods(["GET", "POST"])
def notify_act(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """GET: what the link would do, to confirm; POST: do it, as the logged-in user the link
    was sent to (it works once)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    user = actor(request)
    try:
        link = service.action_link_read(token, user=user)
    except service.LinkRefused as exc:
        return _page(request, status=exc.status, error=exc.message)
    escalation = (
        Escalation.objects.select_related("agent", "task__caller", "task__target")
        .filter(pk=link.escalation_id)
        .first()
    )
    if escalation is None:
        return _page(request, status=404, error=f"there is no escalation {link.escalation_id}")
    context: dict[str, Any] = {
        "link": link,
        "escalation": escalation,
        "verb": DONE[link.action],
        "ask": link.action.capitalize(),
    }
    if request.method == "GET":
        return _page(request, **context)
    try:
        service.action_link_use(
            token=token, user=user, reason=request.POST.get("reason", "")[:2000]
        )
    except service.LinkRefused as exc:
        return _page(request, status=exc.status, error=exc.message, **context)
    except PermissionDenied as exc:
        return _page(request, status=403, error=exc.message, **context)
    except (Conflict, NotFound) as exc:
        return _page(request, status=409, error=exc.message, **context)
    except HubError as exc:  # a reason the decision refuses (empty, too long)
        return _page(request, status=400, error=exc.message, **context)
    escalation.refresh_from_db()
    return _page(request, done=True, **context)


@csrf_exempt
@require_POST
def slack_actions(request: HttpRequest) -> HttpResponse:
    """Slack's interactivity request URL: an Approve or Reject button clicked in a hub
    message. 200 with what was done; 400 not an interaction, 401 not signed by Slack now (or
    a replay), 403 a Slack user the hub does not know, 404/409 no such or already decided."""
    length = request.headers.get("Content-Length", "0")
    if not length.isdigit() or int(length) > service.SLACK_MAX_BODY:
        return JsonResponse(
            {"error": "the request is too large to be a Slack interaction"}, status=413
        )
    try:
        escalation = service.slack_interaction(
            body=request.body,
            timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
            signature=request.headers.get("X-Slack-Signature", ""),
        )
    except service.SlackRefused as exc:
        return JsonResponse({"error": exc.message}, status=exc.status)
    except PermissionDenied as exc:
        return JsonResponse({"error": exc.message}, status=403)
    except NotFound as exc:
        return JsonResponse({"error": exc.message}, status=404)
    except Conflict as exc:
        return JsonResponse({"error": exc.message}, status=409)
    except HubError as exc:
        return JsonResponse({"error": exc.message}, status=400)
    text = f"{escalation.status.capitalize()} by {escalation.decider}: escalation {escalation.pk}"
    return JsonResponse({"text": text, "escalation": escalation.pk, "status": escalation.status})
