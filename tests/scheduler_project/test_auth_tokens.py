"""Bearer tokens: every bad token is a 401; external IdP tokens by setting."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings as django_settings
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import AccessToken, RefreshToken

from tests.conftest import free_port
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
AUDIENCE, ISSUER = "scheduler-api", "https://idp.example.com/"


def get_tasks(client: APIClient, token: str) -> Any:
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/v1/tasks")


def claims_of(user: Any) -> dict[str, Any]:
    return dict(AccessToken.for_user(user).payload)


def test_a_valid_access_token_is_accepted(anon, user) -> None:
    assert get_tasks(anon, str(AccessToken.for_user(user))).status_code == 200


def test_expired_access_token(anon, user) -> None:
    token = AccessToken.for_user(user)
    token.set_exp(lifetime=-timedelta(seconds=1))

    response = get_tasks(anon, str(token))

    assert response.status_code == 401
    assert response.json()["code"] == "token_not_valid"


def test_token_signed_with_another_key(anon, user) -> None:
    forged = jwt.encode(claims_of(user), "another-key-of-at-least-32-bytes-long!!", "HS256")

    assert get_tasks(anon, forged).status_code == 401


def test_alg_none(anon, user) -> None:
    unsigned = jwt.encode(claims_of(user), None, algorithm="none")

    assert get_tasks(anon, unsigned).status_code == 401
    assert get_tasks(anon, unsigned + "x").status_code == 401


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_another_hmac_algorithm_with_the_right_key(anon, user) -> None:
    key = django_settings.SIMPLE_JWT["SIGNING_KEY"]
    token = jwt.encode(claims_of(user), key, algorithm="HS512")

    assert get_tasks(anon, token).status_code == 401


def test_tampered_claims_keep_no_signature(anon, user, other_user) -> None:
    header, _, signature = str(AccessToken.for_user(user)).split(".")
    claims = jwt.utils.base64url_encode(json.dumps(claims_of(other_user)).encode()).decode()

    assert get_tasks(anon, f"{header}.{claims}.{signature}").status_code == 401


def test_refresh_token_used_as_access_token(anon, user) -> None:
    response = get_tasks(anon, str(RefreshToken.for_user(user)))

    assert response.status_code == 401


def test_token_of_a_deleted_user(anon, user) -> None:
    token = str(AccessToken.for_user(user))
    user.delete()

    assert get_tasks(anon, token).status_code == 401


def test_token_of_an_inactive_user(anon, user) -> None:
    token = str(AccessToken.for_user(user))
    user.is_active = False
    user.save(update_fields=["is_active"])

    assert get_tasks(anon, token).status_code == 401
    refreshed = anon.post(
        "/api/v1/auth/token/refresh", {"refresh": str(RefreshToken.for_user(user))}, format="json"
    )
    assert refreshed.status_code == 401


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Basic dXNlcjpwYXNz", "Bearer \x7f"])
def test_malformed_authorization_headers(anon, db, header: str) -> None:
    anon.credentials(HTTP_AUTHORIZATION=header)

    assert anon.get("/api/v1/tasks").status_code == 401


# --- an external identity provider (RS256) --------------------------------------------------------
@pytest.fixture(scope="module")
def idp_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def external_settings(**overrides: Any) -> dict[str, Any]:
    return {
        "ALGORITHMS": ["RS256"],
        "VERIFYING_KEY": "",
        "JWK_URL": "",
        "AUDIENCE": AUDIENCE,
        "ISSUER": ISSUER,
        "USER_CLAIM": "sub",
        "USER_FIELD": "username",
        "LEEWAY_SECONDS": 0,
        **overrides,
    }


def idp_token(key: Any, *, algorithm: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 300}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm=algorithm, headers={"kid": "k1"})


@pytest.fixture
def with_public_key(settings, idp_key) -> None:
    settings.SCHEDULER_EXTERNAL_JWT = external_settings(VERIFYING_KEY=public_pem(idp_key))


def test_idp_token_verified_with_a_public_key(anon, user, idp_key, with_public_key) -> None:
    assert get_tasks(anon, idp_token(idp_key, sub=user.username)).status_code == 200
    # The service's own tokens keep working beside the provider's.
    assert get_tasks(anon, str(AccessToken.for_user(user))).status_code == 200


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "another-api"},
        {"iss": "https://evil.example.com/"},
        {"exp": None},
        {"exp": int(time.time()) - 60},
        {"sub": "nobody-here"},
        {"sub": None},
    ],
    ids=["audience", "issuer", "no-exp", "expired", "unknown-user", "no-subject"],
)
def test_idp_token_refused(anon, user, idp_key, with_public_key, claims) -> None:
    claims = {"sub": user.username, **claims}

    assert get_tasks(anon, idp_token(idp_key, **claims)).status_code == 401


def test_idp_token_signed_by_another_key(anon, user, with_public_key) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    assert get_tasks(anon, idp_token(stranger, sub=user.username)).status_code == 401


def test_idp_token_of_an_inactive_user(anon, idp_key, with_public_key) -> None:
    inactive = UserFactory(is_active=False)

    assert get_tasks(anon, idp_token(idp_key, sub=inactive.username)).status_code == 401


def test_public_key_used_as_an_hmac_secret_is_refused(anon, user, idp_key, with_public_key) -> None:
    """Algorithm confusion: HS256 "signed" with the public key must not pass as the IdP's."""
    now = int(time.time())
    body = {"sub": user.username, "aud": AUDIENCE, "iss": ISSUER, "exp": now + 300}
    forged = _hmac_token(body, public_pem(idp_key).encode())

    assert get_tasks(anon, forged).status_code == 401


def _hmac_token(body: dict[str, Any], secret: bytes) -> str:
    """PyJWT refuses PEM keys as HMAC secrets, so the forgery is assembled by hand."""
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return jwt.utils.base64url_encode(data).decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    signing_input = f"{header}.{b64(json.dumps(body).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


@pytest.fixture
def jwks_url(idp_key) -> Iterator[str]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(idp_key.public_key()))
    document = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    server.shutdown()
    server.server_close()


def test_idp_token_verified_with_a_jwks_url(anon, user, idp_key, settings, jwks_url) -> None:
    settings.SCHEDULER_EXTERNAL_JWT = external_settings(JWK_URL=jwks_url)

    assert get_tasks(anon, idp_token(idp_key, sub=user.username)).status_code == 200
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert get_tasks(anon, idp_token(stranger, sub=user.username)).status_code == 401


def test_unreachable_jwks_is_a_401_not_a_500(anon, user, idp_key, settings) -> None:
    dead = free_port()  # closed again: nothing listens there
    settings.SCHEDULER_EXTERNAL_JWT = external_settings(JWK_URL=f"http://127.0.0.1:{dead}/jwks")

    assert get_tasks(anon, idp_token(idp_key, sub=user.username)).status_code == 401
