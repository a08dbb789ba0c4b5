"""What settings.py falls back to when a variable is unset: a fixed key under tests, and for the
quick start (no DATABASE_URL) a generated SECRET_KEY and the embedded PostgreSQL
(scheduler_project/embedded_db.py). Plain functions of their arguments: no settings here."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

TEST_SECRET_KEY = "insecure-test-key-do-not-use-in-production-0123456789abcdef"


def secret_key(key: str, *, testing: bool, database_url: str, key_file: Path) -> str:
    if key:
        return key
    if testing:
        return TEST_SECRET_KEY
    if database_url:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("SECRET_KEY must be set when DATABASE_URL is")
    # The quick start (embedded database): a key generated once, kept beside the data.
    from scheduler_project.embedded_db import local_secret_key

    key = local_secret_key(key_file)
    os.environ["SECRET_KEY"] = key  # the roles runall starts inherit it
    return key


def database_url(url: str, *, data_dir: Path) -> str:
    """DATABASE_URL; unset means the embedded PostgreSQL (embedded_db.py) in SCHEDULER_DATA_DIR."""
    if url:
        return url
    from scheduler_project.embedded_db import ensure_embedded_database

    url = ensure_embedded_database(data_dir / "pgdata")
    os.environ["DATABASE_URL"] = url  # child processes reuse the same server
    return url


def encryption_key(key: str, *, testing: bool, secret_key: str, key_file: Path) -> str:
    """Fernet key(s) for channel secrets at rest, comma-separated (the first encrypts). Tests and
    the embedded quick start (whose SECRET_KEY was generated into SCHEDULER_DATA_DIR) derive one
    from SECRET_KEY; a deployment sets its own (notifications.W001 warns when it is missing)."""
    if key:
        return key
    if not (testing or (key_file.is_file() and key_file.read_text().strip() == secret_key)):
        return ""
    digest = hashlib.sha256(b"scheduler-notifications-secrets:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")
