"""The provider's keys from its JWKS URL: RS256 and ES256, a rotated key found by one refresh,
an unknown key id after the refresh a 401, and refreshes limited by the cooldown."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from rest_framework.test import APIClient

from accounts.models import Identity

pytestmark = pytest.mark.django_db
ISSUER, AUDIENCE = "https://login.example.com/", "scheduler-api"


class Keys:
    """A JWKS endpoint on 127.0.0.1 whose published keys a test changes; counts its fetches."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []
        self.fetches = 0

    def publish(self, kid: str, key: Any) -> None:
        algorithm = (
            jwt.algorithms.ECAlgorithm
            if isinstance(key, ec.EllipticCurvePrivateKey)
            else (jwt.algorithms.RSAAlgorithm)
        )
        jwk = json.loads(algorithm.to_jwk(key.public_key()))
        self.published.append({**jwk, "kid": kid, "use": "sig"})


@pytest.fixture
def keys() -> Iterator[tuple[Keys, str]]:
    state = Keys()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.fetches += 1
            document = json.dumps({"keys": state.published}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}/jwks"
    server.shutdown()
    server.server_close()


@pytest.fixture
def oidc_api(settings, keys):
    state, url = keys
    settings.OIDC_ISSUER = ISSUER
    settings.SCHEDULER_EXTERNAL_JWT = {
        "ALGORITHMS": ["RS256", "ES256"],
        "VERIFYING_KEY": "",
        "JWK_URL": url,
        "AUDIENCE": AUDIENCE,
        "ISSUER": ISSUER,
        "USER_CLAIM": "sub",
        "USER_FIELD": "",
        "LEEWAY_SECONDS": 0,
        "JWKS_REFRESH_COOLDOWN_SECONDS": 0.0,
    }
    return state


def token(key: Any, kid: str, algorithm: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "s-1", "iat": now, "exp": now + 300, **claims}
    return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})


def status(raw: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client.get("/api/v1/tasks").status_code


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_es256_and_rs256_tokens_are_accepted(oidc_api) -> None:
    ec_key, rs_key = ec.generate_private_key(ec.SECP256R1()), rsa_key()
    oidc_api.publish("ec", ec_key)
    oidc_api.publish("rs", rs_key)

    assert status(token(ec_key, "ec", "ES256", preferred_username="eve")) == 200
    assert status(token(rs_key, "rs", sub="s-2", preferred_username="rob")) == 200
    assert sorted(Identity.objects.values_list("user__username", flat=True)) == ["eve", "rob"]


def test_a_rotated_key_is_found_by_one_refresh(oidc_api) -> None:
    old, new = rsa_key(), rsa_key()
    oidc_api.publish("old", old)
    assert status(token(old, "old")) == 200
    fetched = oidc_api.fetches

    oidc_api.publish("new", new)

    assert status(token(new, "new")) == 200
    assert oidc_api.fetches == fetched + 1
    assert status(token(new, "new", jti="again")) == 200
    assert oidc_api.fetches == fetched + 1, "the refreshed keys are cached"


def test_an_unknown_kid_after_the_refresh_is_a_401(oidc_api) -> None:
    key = rsa_key()
    oidc_api.publish("k1", key)

    assert status(token(key, "k1")) == 200
    assert status(token(key, "k-unknown")) == 401
    assert status(token(rsa_key(), "k1")) == 401  # a published kid, another key's signature


def test_unknown_kids_refresh_at_most_once_per_cooldown(oidc_api, settings) -> None:
    settings.SCHEDULER_EXTERNAL_JWT = {
        **settings.SCHEDULER_EXTERNAL_JWT,
        "JWKS_REFRESH_COOLDOWN_SECONDS": 3600.0,
    }
    key = rsa_key()
    oidc_api.publish("k1", key)
    assert status(token(key, "k1")) == 200
    fetched = oidc_api.fetches

    answers = [status(token(key, f"made-up-{n}")) for n in range(5)]

    assert answers == [401] * 5
    assert oidc_api.fetches == fetched  # the set was fetched just now: no refresh within it


def test_an_asymmetric_algorithm_outside_the_list_is_a_401(oidc_api) -> None:
    key = rsa_key()
    oidc_api.publish("k1", key)

    assert status(token(key, "k1", "PS256")) == 401
    assert status(jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "s-1"}, None, "none")) == 401
