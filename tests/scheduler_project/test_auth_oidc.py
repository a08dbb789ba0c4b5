"""The API takes the company's access tokens (OIDC_* settings), checked against a real provider:
the test provider (tests/oidc_provider/) in its own process, the API in gunicorn."""

from __future__ import annotations

import base64
import time
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from accounts.models import Identity
from tests.gunicorn_server import gunicorn  # noqa: F401  (the fixture)
from tests.oidc_server import API_AUDIENCE, oidc_provider, provider_key  # noqa: F401

pytestmark = pytest.mark.processes

ALICE = {"username": "alice", "password": "alice-pass-1", "email": "alice@example.com"}


@pytest.fixture
def setup(oidc_provider, gunicorn, provider_key):  # noqa: F811
    provider = oidc_provider([ALICE])
    site = gunicorn(workers=1, **provider.scheduler_env())
    return provider, site, provider_key.read_text()


def call(site: str, token: str) -> requests.Response:
    return requests.get(
        f"{site}/api/v1/tasks", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def forged(provider: Any, key: Any, **changes: Any) -> str:
    """A token as the provider's, signed with `key`, with `changes` to its claims or header."""
    token = provider.access_token("alice")
    real = jwt.decode(token, options={"verify_signature": False})
    kid = changes.pop("kid", None) or jwt.get_unverified_header(token)["kid"]
    claims = {name: value for name, value in {**real, **changes}.items() if value is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def test_a_script_uses_the_providers_access_token(setup) -> None:
    provider, site, _ = setup
    token = provider.access_token("alice")

    created = requests.post(
        f"{site}/api/v1/tasks",
        json={
            "name": "from a script",
            "kind": "handler",
            "payload": {"name": "echo", "args": {}},
            "schedule": {"type": "once", "delay": 3600},
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )

    assert created.status_code == 201, created.text
    assert created.json()["owner"] == "alice"
    identity = Identity.objects.select_related("user").get(issuer=provider.issuer)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert identity.subject == claims["sub"]
    assert identity.user.username == "alice"
    assert identity.user.email == "alice@example.com"
    assert not identity.user.has_usable_password()
    # The same person again: the same user, not a second one.
    assert call(site, provider.access_token("alice")).status_code == 200
    assert Identity.objects.count() == 1


def test_one_byte_changed_is_a_401(setup) -> None:
    provider, site, _ = setup
    token = provider.access_token("alice")
    head, body, signature = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[len(raw) // 2] ^= 0x01
    changed = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()

    assert call(site, token).status_code == 200
    assert call(site, f"{head}.{body}.{changed}").status_code == 401


def test_the_providers_key_with_wrong_claims_is_a_401(setup) -> None:
    provider, site, private_pem = setup
    now = int(time.time())
    wrong = {
        "expired": {"exp": now - 60, "iat": now - 400},
        "another audience": {"aud": "another-api"},
        "another issuer": {"iss": "https://login.example.com/"},
        "no expiry": {"exp": None},
    }

    # Signed with the provider's own key under its published kid: only the claims differ.
    assert call(site, forged(provider, private_pem)).status_code == 200
    answers = {
        case: call(site, forged(provider, private_pem, **c)).status_code
        for case, c in wrong.items()
    }
    assert answers == dict.fromkeys(wrong, 401)


def test_a_key_the_provider_does_not_publish_is_a_401(setup) -> None:
    provider, site, _ = setup
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    assert call(site, forged(provider, stranger, kid="not-the-providers")).status_code == 401
    assert call(site, forged(provider, stranger)).status_code == 401


def test_alg_none_is_a_401(setup) -> None:
    provider, site, _ = setup
    claims = jwt.decode(provider.access_token("alice"), options={"verify_signature": False})

    assert call(site, jwt.encode(claims, None, algorithm="none")).status_code == 401
