"""Who may do what in the dashboard: viewer < operator < admin, checked on every view."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.template.response import TemplateResponse

from a2a_core.services.users import ROLES
from dashboard.http import HtmxHttpRequest

RANK = {role: i for i, role in enumerate(ROLES)}


def role_of(user: Any) -> str | None:
    """The user's highest role (a superuser is an admin); None for anyone without one."""
    if not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return "admin"
    names = getattr(user, "_role_names", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._role_names = names
    held = [role for role in ROLES if role in names]
    return held[-1] if held else None


def has_role(user: Any, role: str) -> bool:
    mine = role_of(user)
    return mine is not None and RANK[mine] >= RANK[role]


def forbidden(request: HtmxHttpRequest, role: str) -> HttpResponse:
    """403: the page for a browser, the error fragment for an htmx request."""
    template = "dashboard/forbidden.html#message" if request.htmx else "dashboard/forbidden.html"
    return TemplateResponse(request, template, {"needed": role}, status=403)


def role_required(
    role: str,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Log in first; then the view runs only for users with at least `role`."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def checked(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                return forbidden(request, role)
            return view(request, *args, **kwargs)

        return checked

    return decorate


viewer_required = role_required("viewer")
operator_required = role_required("operator")
admin_required = role_required("admin")
