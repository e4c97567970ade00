"""`manage.py check --deploy` is clean with the production settings the README documents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# README, "Production": the variables a deployment behind TLS sets.
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "a-production-secret-key-that-is-long-and-random-0123456789abcdefghij",
    "ALLOWED_HOSTS": "hub.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://hub.example.com",
    "HUB_SECURE_COOKIES": "true",
    "HUB_SSL_REDIRECT": "true",
    "HUB_HSTS_SECONDS": "31536000",
    "HUB_BEHIND_PROXY": "true",
}


def test_the_deploy_checks_pass_with_the_documented_production_settings(tmp_path):
    env = {**os.environ, **PRODUCTION, "HUB_DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deploy_checks_flag_a_development_setup(tmp_path):
    env = {**os.environ, "HUB_DATA_DIR": str(tmp_path), "DEBUG": "true"}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "security.W018" in result.stderr + result.stdout  # DEBUG on in deployment
