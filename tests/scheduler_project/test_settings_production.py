"""Production settings, each in a fresh process with a production
environment: `check --deploy` passes at WARNING level behind a TLS proxy, a short signing key
stops the process at start-up, and the quick start's plain-HTTP defaults stay as they are."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet

from tests.conftest import ROOT, database_url

pytestmark = pytest.mark.django_db
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "p8Jq-2vN_x4Rk7Lz0Wc3Ys6Ht9Fd1Ga5Mb8Qe2Ui4Oj7Pl0Kn3Vr6Xt9Zw1Cy4As",
    "JWT_SIGNING_KEY": "s3Dk9Lw2Qp7Zx4Vn8Mb1Rt6Yh0Gf5Jc3Ue9Io2Pa7Sl4Kd8Wq1Ez6Xr0Tc5Vb",
    "SCHEDULER_ENCRYPTION_KEY": Fernet.generate_key().decode(),
    "ALLOWED_HOSTS": "scheduler.example.com",
    "SCHEDULER_BEHIND_TLS_PROXY": "true",
    "SCHEDULER_HSTS_PRELOAD": "true",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`manage.py` in a clean environment: nothing of the test run (SCHEDULER_TESTING, ...)."""
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DATABASE_URL": database_url(),
        "LOG_FORMAT": "plain",
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def python_setting(expression: str, **env: str) -> subprocess.CompletedProcess:
    code = f"from django.conf import settings; print({expression})"
    return manage("shell", "--no-imports", "-c", code, **env)


def test_check_deploy_passes_with_production_settings() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_the_tls_proxy_setting_deploy_check_warns() -> None:
    env = {k: v for k, v in PRODUCTION.items() if k != "SCHEDULER_BEHIND_TLS_PROXY"}

    result = manage("check", "--deploy", "--fail-level", "WARNING", **env)

    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr


def test_tls_proxy_settings() -> None:
    expression = (
        "settings.SECURE_PROXY_SSL_HEADER, settings.SECURE_SSL_REDIRECT, "
        "settings.SECURE_HSTS_SECONDS, settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE"
    )
    result = python_setting(expression, **PRODUCTION)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "('HTTP_X_FORWARDED_PROTO', 'https') True 31536000 True True"


def test_debug_is_off_unless_asked_for() -> None:
    env = {k: v for k, v in PRODUCTION.items() if k != "DEBUG"}

    assert python_setting("settings.DEBUG", **env).stdout.strip() == "False"


@pytest.mark.parametrize(
    "keys",
    [
        {"JWT_SIGNING_KEY": "too-short-31-bytes-xxxxxxxxxxxx"},
        {"JWT_SIGNING_KEY": "", "SECRET_KEY": "short-secret-key"},
    ],
    ids=["short-jwt-key", "short-secret-key-fallback"],
)
def test_short_signing_key_is_refused_at_start_up(keys: dict[str, str]) -> None:
    result = python_setting("settings.DEBUG", **{**PRODUCTION, **keys})

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "at least 32 bytes" in result.stderr


def test_signing_key_comes_from_the_environment() -> None:
    result = python_setting("settings.SIMPLE_JWT['SIGNING_KEY']", **PRODUCTION)

    assert result.stdout.strip() == PRODUCTION["JWT_SIGNING_KEY"]


def test_external_idp_needs_an_asymmetric_algorithm() -> None:
    env = {**PRODUCTION, "JWT_JWK_URL": "https://idp.example.com/jwks", "JWT_ALGORITHM": "HS256"}

    result = python_setting("settings.SCHEDULER_EXTERNAL_JWT", **env)

    assert result.returncode != 0 and "asymmetric" in result.stderr


def test_a_malformed_write_rate_is_refused_at_start_up() -> None:
    result = python_setting(
        "settings.SCHEDULER_WRITE_RATE", **PRODUCTION, SCHEDULER_WRITE_RATE="lots"
    )

    assert result.returncode != 0 and "SCHEDULER_WRITE_RATE" in result.stderr


OIDC = {
    "OIDC_RP_CLIENT_ID": "scheduler",
    "OIDC_ISSUER": "https://login.example.com/",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://login.example.com/authorize",
    "OIDC_OP_TOKEN_ENDPOINT": "https://login.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://login.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://login.example.com/jwks",
}


def test_oidc_is_off_by_default() -> None:
    result = python_setting(
        "settings.AUTHENTICATION_BACKENDS, settings.SCHEDULER_EXTERNAL_JWT", **PRODUCTION
    )

    assert result.stdout.strip() == "['django.contrib.auth.backends.ModelBackend'] None"


def test_oidc_signs_in_browsers_and_api_tokens() -> None:
    result = python_setting(
        "settings.AUTHENTICATION_BACKENDS[-1], settings.SCHEDULER_EXTERNAL_JWT['JWK_URL'],"
        " settings.SCHEDULER_EXTERNAL_JWT['AUDIENCE'], settings.OIDC_USE_PKCE",
        **PRODUCTION,
        **OIDC,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "accounts.backends.OIDCBackend",
        "https://login.example.com/jwks",
        "scheduler",  # the client id, when OIDC_API_AUDIENCE is unset
        "True",
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"OIDC_OP_JWKS_ENDPOINT": ""},
        {"OIDC_RP_SIGN_ALGO": "HS256"},
        {"OIDC_API_ALGORITHMS": "RS256,none"},
        {"JWT_JWK_URL": "https://other.example.com/jwks"},
    ],
    ids=["missing-endpoint", "symmetric-id-token", "none-for-the-api", "both-providers"],
)
def test_a_bad_oidc_configuration_stops_the_process(change: dict[str, str]) -> None:
    result = python_setting("settings.OIDC_ISSUER", **PRODUCTION, **{**OIDC, **change})

    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr
