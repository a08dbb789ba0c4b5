"""Browser sign-in through the company's identity provider (mozilla-django-oidc's code flow,
PKCE on): the library runs the redirects, the state, nonce and code verifier and the token
request; this backend checks the ID token fully and maps its claims to a user.

The library checks only the ID token's signature, algorithm and nonce; `iss`, `aud` (our client
id) and `exp` are checked here too, so a token the provider issued to another client or long ago
signs nobody in.
"""

from __future__ import annotations

from typing import Any

import jwt
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts.identities import ClaimsRefused, user_for_claims


class OIDCBackend(OIDCAuthenticationBackend):
    def get_payload_data(self, token: bytes | str, key: Any) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key,
                algorithms=[settings.OIDC_RP_SIGN_ALGO],
                audience=settings.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=settings.OIDC_LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "sub"]},
            )
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise SuspiciousOperation(f"ID token refused: {type(exc).__name__}") from None

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> Any:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        # The userinfo answer must be about the person the ID token names (OIDC Core 5.3.2).
        if userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about another subject")
        try:
            user = user_for_claims({**payload, **userinfo}, issuer=settings.OIDC_ISSUER)
        except ClaimsRefused as exc:
            raise SuspiciousOperation(str(exc)) from None
        return user if self.user_can_authenticate(user) else None
