"""Dashboard users and their roles: viewer < operator < admin.

A role is a Django group of that name (a superuser is an admin). Viewers read everything;
operators also answer escalations and decide on held messages; admins also edit the policy
and manage agents and tokens.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.services.audit import audit_record

ROLES = ("viewer", "operator", "admin")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValidationFailed(
            "unknown role", [FieldProblem("role", f"got {role!r}; valid: {', '.join(ROLES)}")]
        )


def _give_role(user: User, role: str) -> None:
    user.groups.set([Group.objects.get_or_create(name=role)[0]])
    user.is_staff = role == "admin"
    user.is_superuser = role == "admin"
    user.save()


@transaction.atomic
def user_ensure_admin(*, username: str, password: str) -> User:
    """Make `username` an administrator with this password, creating the user if needed."""
    user, created = get_user_model().objects.get_or_create(username=username)
    user.set_password(password)
    _give_role(user, "admin")
    audit_record(
        action="user.admin_login",
        summary=f"{'created' if created else 'reset the password of'} administrator {username}",
        actor_label="cli",
        object_type="user",
        object_id=username,
    )
    return user


@transaction.atomic
def user_create(
    *, username: str, password: str, role: str, actor: User | None = None, actor_label: str = ""
) -> User:
    """Create a dashboard user with `role`. Raises `ValidationFailed` for a taken name, an
    unknown role or a password Django's validators refuse."""
    _check_role(role)
    problems = []
    username = username.strip()
    if not username:
        problems.append(FieldProblem("username", "is required"))
    elif get_user_model().objects.filter(username=username).exists():
        problems.append(FieldProblem("username", f"{username!r} is taken"))
    try:
        validate_password(password)
    except ValidationError as exc:
        problems.extend(FieldProblem("password", message) for message in exc.messages)
    if problems:
        raise ValidationFailed("cannot create the user", problems)
    user = get_user_model().objects.create_user(username=username, password=password)
    _give_role(user, role)
    audit_record(
        action="user.create",
        summary=f"created {role} {username}",
        actor=actor,
        actor_label=actor_label,
        object_type="user",
        object_id=username,
    )
    return user


@transaction.atomic
def user_set_role(
    *, username: str, role: str, actor: User | None = None, actor_label: str = ""
) -> User:
    _check_role(role)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationFailed("unknown user", [FieldProblem("username", f"no user {username!r}")])
    _give_role(user, role)
    audit_record(
        action="user.role",
        summary=f"{username} is now {role}",
        actor=actor,
        actor_label=actor_label,
        object_type="user",
        object_id=username,
    )
    return user
