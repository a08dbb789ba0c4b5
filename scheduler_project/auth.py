"""Bearer-token authentication: the service's own JWTs and, optionally, an external IdP's.

Tokens the service issues at /api/v1/auth/token are HS256, signed with JWT_SIGNING_KEY, and
checked by simplejwt exactly as before (type `access`, expiry, the user active and existing).

When SCHEDULER_EXTERNAL_JWT is configured (JWT_VERIFYING_KEY or JWT_JWK_URL, or the OIDC_*
settings; see docs/security.md), a token whose header names an asymmetric algorithm is verified
against the identity provider's public key instead: the configured algorithms only, signature,
`exp` (required), and `aud` / `iss` when configured. With JWT_*, its user is looked up by a
claim (`sub` by default) in a user field (`username` by default) and never created on the fly;
with OIDC_*, by its (issuer, `sub`) identity, created on first use as the browser's sign-in
does (accounts/identities.py). An unknown or inactive user is refused just as for local tokens.
The algorithm is chosen by the header, but each branch accepts only its own algorithms, so a
token cannot cross over (no HS256-with-public-key confusion, no `alg: none`).

A token's user is read from the database at most once per SCHEDULER_AUTH_USER_CACHE_SECONDS
(5 s) in each API process, not on every request: that query was a third of the server time of
a single task read. So a user deactivated or deleted is refused by every process within that
many seconds; 0 reads the user on every request.

A token that passed validation is remembered by its exact text until its `exp`: the signature
check and decoding showed in every request's profile, and a client sends the same token for
minutes. Only the same string, signature included, finds the entry, and access tokens have
nothing else to revoke (simplejwt blacklists refresh tokens); the user is still looked up as
above.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.signals import setting_changed
from drf_spectacular.contrib.rest_framework_simplejwt import SimpleJWTScheme
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated
from rest_framework.request import Request
from rest_framework_simplejwt import authentication
from rest_framework_simplejwt.exceptions import InvalidToken
from rest_framework_simplejwt.settings import api_settings

from accounts.identities import ClaimsRefused, user_for_claims

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

JWKS_TIMEOUT_SECONDS = 10


def request_owner(request: Request) -> User:
    """The user an API request acts for. Every API view requires authentication (DRF's
    IsAuthenticated runs before the view), so the anonymous user never gets this far."""
    user = request.user
    if isinstance(user, AnonymousUser):
        raise NotAuthenticated()
    return user


class ExternalToken(dict):
    """The verified claims of an identity provider's token (what `request.auth` holds)."""


# (token kind, user claim[, groups]) -> (monotonic time the entry expires, the user); per process.
_users: dict[tuple[Any, ...], tuple[float, Any]] = {}
_USERS_MAX = 10_000  # distinct users held at once; the whole cache is dropped past it


# The exact token text -> (its `exp`, epoch seconds; the validated token); per process.
_tokens: dict[bytes, tuple[float, Any]] = {}
_TOKENS_MAX = 10_000  # tokens held at once; the whole cache is dropped past it


def clear_user_cache(**_: Any) -> None:
    _users.clear()
    _tokens.clear()


setting_changed.connect(clear_user_cache)  # a test's new keys or settings see no stale entry


class JWTAuthentication(authentication.JWTAuthentication):
    def get_validated_token(self, raw_token: bytes) -> Any:
        cached = _tokens.get(raw_token)
        if cached is not None and time.time() < cached[0]:
            return cached[1]
        token = self._validate(raw_token)
        expires = token.get("exp")
        if isinstance(expires, int | float) and not isinstance(expires, bool):
            if len(_tokens) >= _TOKENS_MAX:
                _tokens.clear()
            _tokens[raw_token] = (float(expires), token)
        return token

    def _validate(self, raw_token: bytes) -> Any:
        config = settings.SCHEDULER_EXTERNAL_JWT
        if config is None or _header_algorithm(raw_token).startswith("HS"):
            return super().get_validated_token(raw_token)
        return ExternalToken(decode_external(raw_token.decode("ascii", "replace"), config))

    def get_user(self, validated_token: Any) -> Any:
        seconds = settings.SCHEDULER_AUTH_USER_CACHE_SECONDS
        config = settings.SCHEDULER_EXTERNAL_JWT  # set whenever a token is an ExternalToken
        key: tuple[Any, ...]
        if config is not None and isinstance(validated_token, ExternalToken):
            # The groups too: a token with other groups than the cached user's signs in again,
            # so a person who left a mapped group loses its team at once (OIDC_TEAM_GROUPS).
            groups = validated_token.get(settings.OIDC_GROUPS_CLAIM)
            shown = tuple(groups) if isinstance(groups, list) else groups
            key = ("external", validated_token.get(config["USER_CLAIM"]), repr(shown))
        else:
            key = ("local", validated_token.get(api_settings.USER_ID_CLAIM))
        cacheable = seconds > 0 and isinstance(key[1], str | int)
        now = time.monotonic()
        cached = _users.get(key) if cacheable else None
        if cached is not None and now < cached[0]:
            return cached[1]
        user = self._read_user(validated_token)  # refuses a missing or inactive user
        if cacheable:
            if len(_users) >= _USERS_MAX:
                _users.clear()
            _users[key] = (now + seconds, user)
        return user

    def _read_user(self, validated_token: Any) -> Any:
        config = settings.SCHEDULER_EXTERNAL_JWT
        if config is None or not isinstance(validated_token, ExternalToken):
            return super().get_user(validated_token)
        value = validated_token.get(config["USER_CLAIM"])
        if not isinstance(value, str) or not value:
            raise InvalidToken("Token contained no recognizable user identification")
        if not config["USER_FIELD"]:
            return _oidc_user(validated_token)
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{config["USER_FIELD"]: value})
        except user_model.DoesNotExist:
            raise AuthenticationFailed("User not found", code="user_not_found") from None
        if not user.is_active:
            raise AuthenticationFailed("User is inactive", code="user_inactive")
        return user


def _oidc_user(claims: ExternalToken) -> Any:
    """Sign-in through OIDC: the user of the token's (issuer, sub), created on first use, so a
    script may call the API before its owner ever opened the browser UI."""
    try:
        user = user_for_claims(dict(claims), issuer=settings.OIDC_ISSUER)
    except ClaimsRefused as exc:
        raise InvalidToken(str(exc)) from None
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
            cooldown = config.get("JWKS_REFRESH_COOLDOWN_SECONDS", 30.0)
            client = _jwks_client(config["JWK_URL"], cooldown)
            key: Any = client.get_signing_key_from_jwt(token).key
        else:
            key = config["VERIFYING_KEY"]
        return jwt.decode(
            token,
            key,
            algorithms=config["ALGORITHMS"],
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
def _jwks_client(url: str, cooldown: float) -> jwt.PyJWKClient:
    # One client per process: it caches the provider's keys for five minutes and fetches them
    # again for a key id it does not know (a rotation), at most once per `cooldown` seconds, so
    # tokens with made-up key ids cannot make the API flood the provider.
    return jwt.PyJWKClient(
        url,
        cache_keys=True,
        lifespan=300,
        timeout=JWKS_TIMEOUT_SECONDS,
        cooldown_duration=cooldown,
    )


class JWTAuthenticationScheme(SimpleJWTScheme):
    """The OpenAPI security scheme (`jwtAuth`, bearer JWT) of the class above."""

    target_class = "scheduler_project.auth.JWTAuthentication"
