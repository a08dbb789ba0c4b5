"""Channel secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256) with keys from the environment.

SCHEDULER_ENCRYPTION_KEY holds one or more comma-separated Fernet keys: the first encrypts, all
decrypt. Rotate by prepending a new key; every later save of a channel re-encrypts with it, and
the old key can go once no stored secret needs it.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from notifications.exceptions import EncryptionKeyMissing, SecretUnreadable


def parse_keys(value: str) -> list[Fernet]:
    """The Fernet objects for a comma-separated key list; ValueError for a malformed key."""
    return [Fernet(key.strip().encode("ascii")) for key in value.split(",") if key.strip()]


def _fernet() -> MultiFernet:
    # Read at call time (never at import): settings may change in tests and between processes.
    keys = parse_keys(settings.SCHEDULER_ENCRYPTION_KEY or "")
    if not keys:
        raise EncryptionKeyMissing(
            "SCHEDULER_ENCRYPTION_KEY is not set; channel secrets cannot be stored or read."
        )
    return MultiFernet(keys)


def encrypt(values: dict[str, Any]) -> str:
    """The Fernet token of `values` as JSON; "" for no secrets (nothing to protect)."""
    if not values:
        return ""
    return _fernet().encrypt(json.dumps(values, sort_keys=True).encode()).decode("ascii")


def decrypt(token: str) -> dict[str, Any]:
    """The secrets stored as `token`; {} for ""; SecretUnreadable when no key opens it."""
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode("ascii")))
    except (InvalidToken, ValueError):
        raise SecretUnreadable(
            "a channel secret does not decrypt with SCHEDULER_ENCRYPTION_KEY"
        ) from None
