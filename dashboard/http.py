"""The request type dashboard views see: Django's, with django-htmx's details attached."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def actor(request: HttpRequest) -> User:
    """The logged-in user acting (views behind `role_required` always have one)."""
    user = request.user
    assert isinstance(user, User), "role_required lets only logged-in users through"
    return user
