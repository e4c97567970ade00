"""Settings that take one of a few values: a value that is none of them stops the hub at
start, naming the variable, the values it takes and what it was given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env_choice
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent

JUNK = ["sometimes", "0.4", "declared,always", "agent\x7f", "é" * 300]


@pytest.mark.parametrize(
    ("name", "choices"),
    [
        ("HUB_CARD_GRPC", "declared, always, never"),
        ("HUB_CARD_UNVERSIONED", "agent, 0.3, 1.0"),
    ],
)
def test_a_junk_card_setting_stops_a2a_serve_at_start_saying_what_it_takes(tmp_path, name, choices):
    env = {**os.environ, "HUB_DATA_DIR": str(tmp_path), name: "sometimes"}
    env.pop("DATABASE_URL", None)
    started = subprocess.run(
        [sys.executable, "manage.py", "a2a", "serve", "--no-demo", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    last = started.stderr.strip().splitlines()[-1]
    assert last.endswith(f"{name} must be one of {choices}, got 'sometimes'")


@pytest.mark.parametrize("value", JUNK)
def test_env_choice_refuses_anything_but_its_choices(monkeypatch, value):
    monkeypatch.setenv("HUB_CARD_GRPC", value)
    with pytest.raises(ImproperlyConfigured, match=r"^HUB_CARD_GRPC must be one of declared, "):
        env_choice("HUB_CARD_GRPC", "declared", ("declared", "always", "never"))


@pytest.mark.parametrize(
    ("value", "read"), [(None, "declared"), ("", "declared"), (" Always ", "always")]
)
def test_env_choice_takes_its_choices_in_any_case_and_its_default_when_unset(
    monkeypatch, value, read
):
    if value is None:
        monkeypatch.delenv("HUB_CARD_GRPC", raising=False)
    else:
        monkeypatch.setenv("HUB_CARD_GRPC", value)
    assert env_choice("HUB_CARD_GRPC", "declared", ("declared", "always", "never")) == read
