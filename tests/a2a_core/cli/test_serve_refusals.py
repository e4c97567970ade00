"""`a2a serve` refuses what it cannot run before it changes anything."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from tests.a2a_core.cli.helpers import a2a

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="the-admins-own")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--workers", "2", "--server", "daphne"], r"several workers are run with uvicorn"),
        (["--workers", "0"], r"--workers must be at least 1, got 0"),
    ],
)
def test_a_server_it_cannot_run_is_refused_and_the_admin_password_is_kept(admin, args, error):
    with pytest.raises(CommandError, match=error):
        a2a("serve", *args, "--no-demo")

    admin.refresh_from_db()
    assert admin.check_password("the-admins-own")


def test_several_workers_without_redis_are_refused_and_the_admin_password_is_kept(admin, settings):
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match=r"several workers need REDIS_URL"):
        a2a("serve", "--workers", "2", "--no-demo")

    admin.refresh_from_db()
    assert admin.check_password("the-admins-own")
