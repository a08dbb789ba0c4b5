"""The provider's claims (username, email, groups) and its JWT access tokens."""

from __future__ import annotations

import secrets
import time
from typing import Any

import jwt
from django.conf import settings
from jwcrypto import jwk
from oauth2_provider.oauth2_validators import OAuth2Validator


def key_id() -> str:
    # The kid DOT's JWKS endpoint publishes for this key.
    return str(jwk.JWK.from_pem(settings.PRIVATE_KEY.encode()).thumbprint())


def user_claims(user: Any) -> dict[str, Any]:
    return {
        "preferred_username": user.username,
        "email": user.email,
        "groups": sorted(user.groups.values_list("name", flat=True)),
    }


class Validator(OAuth2Validator):
    # Groups travel with the profile scope, as with Keycloak's and Okta's group mappers.
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        return user_claims(request.user)


def jwt_access_token(request: Any, refresh_token: bool = False) -> str:
    now = int(time.time())
    claims = {
        "iss": settings.ISSUER,
        "aud": settings.API_AUDIENCE,
        "sub": str(request.user.pk),
        "client_id": request.client_id,
        "scope": " ".join(request.scopes),
        "iat": now,
        "jti": secrets.token_hex(16),  # two tokens of one second differ (DOT stores a checksum)
        "exp": now + int(request.expires_in),
        **user_claims(request.user),
    }
    return jwt.encode(claims, settings.PRIVATE_KEY, algorithm="RS256", headers={"kid": key_id()})
