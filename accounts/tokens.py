"""Service accounts' API tokens: made, found by their text, used, revoked.

A token is `sched_` and 43 characters of a random 256-bit secret; the prefix tells it from a
JWT at a glance (and to secret scanners). Only its SHA-256 is stored: a secret of that entropy
needs no slow hash, and the lookup is one unique-index probe. The text is shown once, when the
token is made, and never again.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from accounts.models import ApiToken, ServiceAccount
from tasks import audit

PREFIX = "sched_"
SCOPES = ("read", "write", "run", "tasksets:apply")
TOUCH_EVERY = timedelta(minutes=1)  # `last_used_at` is written at most this often per token


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_token(
    *, account: ServiceAccount, name: str, scopes: list[str], expires_at: datetime
) -> tuple[ApiToken, str]:
    """A new token of `account` and its text (the only time the text exists outside the
    client)."""
    text = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            account=account,
            name=name,
            digest=digest(text),
            scopes=sorted(set(scopes)),
            expires_at=expires_at,
        )
        changes = {"service_account": account.name, "scopes": token.scopes}
        audit.record(_entry("create_token", token, {**changes, "expires_at": expires_at}))
    return token, text


def _entry(action: str, token: ApiToken, changes: dict[str, Any]) -> audit.Entry:
    """The audit entry of `action` on `token`: its id and name, its account's team; never its
    text nor its digest."""
    return audit.Entry(
        action=action,
        object_type="token",
        object_id=str(token.pk),
        object_name=token.name,
        changes=changes,
        team_id=token.account.team_id,
    )


def find(text: str) -> ApiToken | None:
    """The token whose text is `text` (revoked and expired ones too: the caller says why it
    refuses them), with its account's user."""
    return (
        ApiToken.objects.select_related("account__user", "account__team")
        .filter(digest=digest(text))
        .first()
    )


def touch(token: ApiToken, *, now: datetime) -> None:
    """Record a use: one UPDATE a minute per token at most, whatever the request rate (the
    condition makes concurrent requests of the same minute write nothing)."""
    if token.last_used_at is not None and now - token.last_used_at < TOUCH_EVERY:
        return
    stale = now - TOUCH_EVERY
    with transaction.atomic():
        ApiToken.objects.filter(pk=token.pk).exclude(last_used_at__gt=stale).update(
            last_used_at=now
        )


def revoke(token: ApiToken, *, now: datetime) -> ApiToken:
    """Revoke `token`: the next request that sends it is refused (nothing caches a token).
    Recorded once: revoking a revoked token changes nothing and records nothing."""
    with transaction.atomic():
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now
        )
        if revoked:
            changes = {"service_account": token.account.name, "revoked_at": [None, now]}
            audit.record(_entry("revoke_token", token, changes))
    token.refresh_from_db(fields=["revoked_at"])
    return token


def refusal(token: ApiToken | None, *, now: datetime) -> tuple[str, str] | None:
    """Why `token` may not be used now, as (code, message), or None."""
    if token is None:
        return "token_unknown", "No such token."
    if token.revoked_at is not None:
        return "token_revoked", "The token was revoked."
    if token.expires_at <= now:
        return "token_expired", "The token expired."
    user: Any = token.account.user
    if not user.is_active:
        return "user_inactive", "The token's service account is inactive."
    return None
