"""Dashboard users of each role, and test clients logged in as them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from a2a_core.services.users import ROLES, user_create

PASSWORD = "a-long-test-password-2026"


@pytest.fixture
def users(db) -> dict[str, User]:
    return {role: user_create(username=role, password=PASSWORD, role=role) for role in ROLES}


@pytest.fixture
def as_role(users) -> Callable[[str], Client]:
    """`as_role("operator")` -> a test client logged in as that role (CSRF checks on)."""

    def login(role: str) -> Client:
        client = Client(enforce_csrf_checks=True)
        client.force_login(users[role])
        return client

    return login
