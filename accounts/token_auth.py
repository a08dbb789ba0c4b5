"""`Authorization: Bearer sched_…`: a service account's token (accounts/tokens.py), beside
the JWTs (scheduler_project/auth.py), and the scopes that narrow what it may do.

Nothing about a token is cached: a revoked token is refused at the next request. Its
account's role in the team is checked as a person's is (accounts/access.py); the scopes only
take away, so a token never grants more than its account's role.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts import tokens
from accounts.models import ApiToken
from scheduler_project.auth import JWTAuthentication


class ServiceTokenAuthentication(BaseAuthentication):
    """A bearer token with the service tokens' prefix; any other is left to the JWT class."""

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != b"bearer":
            return None
        text = parts[1].decode("ascii", "replace")
        if not text.startswith(tokens.PREFIX):
            return None
        now = timezone.now()
        token = tokens.find(text)
        refused = tokens.refusal(token, now=now)
        if refused is not None:
            code, message = refused
            raise AuthenticationFailed(message, code=code)
        assert token is not None
        tokens.touch(token, now=now)
        return token.account.user, token

    def authenticate_header(self, request: Request) -> str:
        # The JWT class's challenge, so a 401 reads as it did before service tokens.
        return str(JWTAuthentication().authenticate_header(request))


def needed_scopes(view: Any, method: str) -> tuple[str, ...]:
    """The scopes of which a token needs one for `method` on `view`: the view's `token_scopes`
    by method, else `read` for a read and `write` for any other; () refuses every token."""
    declared = getattr(view, "token_scopes", {})
    if method in declared:
        return tuple(declared[method])
    if "*" in declared:
        return tuple(declared["*"])
    return ("read",) if method in SAFE_METHODS else ("write",)


class TokenScopes(BasePermission):
    """A request made with a service token needs one of the view's scopes for its method;
    JWTs pass (a person has no scopes: their role alone decides)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        needed = needed_scopes(view, request.method or "GET")
        if not needed:
            raise PermissionDenied("A service token cannot do this.", code="token_scope")
        if not set(needed) & set(token.scopes):
            wanted = " or ".join(f"`{scope}`" for scope in needed)
            raise PermissionDenied(
                f"The token's scopes ({', '.join(token.scopes)}) do not include {wanted}.",
                code="token_scope",
            )
        return True


class ServiceTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme (`serviceToken`, bearer) of ServiceTokenAuthentication."""

    target_class = "accounts.token_auth.ServiceTokenAuthentication"
    name = "serviceToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A service account's token (`sched_…`), docs/security.md.",
        }
