"""Dashboard users."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from a2a_core.services.audit import audit_record


@transaction.atomic
def user_ensure_admin(*, username: str, password: str) -> User:
    """Make `username` an administrator with this password, creating the user if needed."""
    user, created = get_user_model().objects.get_or_create(username=username)
    user.is_staff = True
    user.is_superuser = True
    user.set_password(password)
    user.save()
    audit_record(
        action="user.admin_login",
        summary=f"{'created' if created else 'reset the password of'} administrator {username}",
        actor_label="cli",
        object_type="user",
        object_id=username,
    )
    return user
