"""Bearer-token authentication: the service's own JWTs and, optionally, an external IdP's.

Tokens the service issues at /api/v1/auth/token are HS256, signed with JWT_SIGNING_KEY, and
checked by simplejwt exactly as before (type `access`, expiry, the user active and existing).

When SCHEDULER_EXTERNAL_JWT is configured (JWT_VERIFYING_KEY or JWT_JWK_URL, see
docs/security.md), a token whose header names an asymmetric algorithm is verified against the
identity provider's public key instead: that algorithm only, signature, `exp` (required), and
`aud` / `iss` when configured. Its user is looked up by a claim (`sub` by default) in a user
field (`username` by default); users are never created on the fly, and an unknown or inactive
user is refused just as for local tokens. The algorithm is chosen by the header, but each
branch accepts only its own algorithms, so a token cannot cross over (no HS256-with-public-key
confusion, no `alg: none`).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from drf_spectacular.contrib.rest_framework_simplejwt import SimpleJWTScheme
from rest_framework.exceptions import AuthenticationFailed
from rest_framework_simplejwt import authentication
from rest_framework_simplejwt.exceptions import InvalidToken

logger = logging.getLogger(__name__)

JWKS_TIMEOUT_SECONDS = 10


class ExternalToken(dict):
    """The verified claims of an identity provider's token (what `request.auth` holds)."""


class JWTAuthentication(authentication.JWTAuthentication):
    def get_validated_token(self, raw_token: bytes) -> Any:
        config = settings.SCHEDULER_EXTERNAL_JWT
        if config is None or _header_algorithm(raw_token).startswith("HS"):
            return super().get_validated_token(raw_token)
        return ExternalToken(decode_external(raw_token.decode("ascii", "replace"), config))

    def get_user(self, validated_token: Any) -> Any:
        if not isinstance(validated_token, ExternalToken):
            return super().get_user(validated_token)
        config = settings.SCHEDULER_EXTERNAL_JWT
        value = validated_token.get(config["USER_CLAIM"])
        if not isinstance(value, str) or not value:
            raise InvalidToken("Token contained no recognizable user identification")
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{config["USER_FIELD"]: value})
        except user_model.DoesNotExist:
            raise AuthenticationFailed("User not found", code="user_not_found") from None
        if not user.is_active:
            raise AuthenticationFailed("User is inactive", code="user_inactive")
        return user


def _header_algorithm(raw_token: bytes) -> str:
    try:
        return str(jwt.get_unverified_header(raw_token).get("alg", ""))
    except jwt.PyJWTError:
        return ""  # malformed: the local path refuses it with simplejwt's own message


def decode_external(token: str, config: dict[str, Any]) -> dict[str, Any]:
    """The claims of an external token, or InvalidToken (401) whatever is wrong with it."""
    try:
        if config["JWK_URL"]:
            key: Any = _jwks_client(config["JWK_URL"]).get_signing_key_from_jwt(token).key
        else:
            key = config["VERIFYING_KEY"]
        return jwt.decode(
            token,
            key,
            algorithms=[config["ALGORITHM"]],
            audience=config["AUDIENCE"],
            issuer=config["ISSUER"],
            leeway=config["LEEWAY_SECONDS"],
            options={"require": ["exp"], "verify_aud": config["AUDIENCE"] is not None},
        )
    except jwt.PyJWKClientConnectionError as exc:
        logger.warning("cannot fetch the identity provider's keys: %s", exc)
        raise InvalidToken("The identity provider's keys are unavailable.") from None
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        raise InvalidToken(f"Token is invalid: {type(exc).__name__}") from None


@functools.cache
def _jwks_client(url: str) -> jwt.PyJWKClient:
    # One client per process: it caches the provider's keys between requests.
    return jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=JWKS_TIMEOUT_SECONDS)


class JWTAuthenticationScheme(SimpleJWTScheme):
    """The OpenAPI security scheme (`jwtAuth`, bearer JWT) of the class above."""

    target_class = "scheduler_project.auth.JWTAuthentication"
