"""A scratch database for one benchmark: created empty, migrated, made the current connection's
database, and dropped afterwards (unless kept), so a benchmark never touches real rows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from scheduler_project.database import database_url


def admin_conninfo(base: dict[str, Any]) -> dict[str, str]:
    """Connection parameters for the server's `postgres` database (CREATE/DROP DATABASE)."""
    params = {"dbname": "postgres", "user": base.get("USER") or "postgres"}
    for key, name in (("HOST", "host"), ("PORT", "port"), ("PASSWORD", "password")):
        if base.get(key):
            params[name] = str(base[key])
    return params


def _exists(admin: dict[str, str], name: str) -> bool:
    with psycopg.connect(autocommit=True, **admin) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return row is not None


def _drop(admin: dict[str, str], name: str) -> None:
    with psycopg.connect(autocommit=True, **admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database(suffix: str, *, keep: bool = False, reuse: bool = False) -> Iterator[str]:
    """`<configured name>_<suffix>`, migrated and current; yields its URL. With `reuse`, one
    left by an earlier run (`keep`) is kept as it is and migrated forward, not made anew."""
    base = dict(settings.DATABASES["default"])
    name = f"{base['NAME']}_{suffix}"
    admin = admin_conninfo(base)
    if not (reuse and _exists(admin, name)):
        _drop(admin, name)
        with psycopg.connect(autocommit=True, **admin) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    try:
        connection.close()
        settings.DATABASES["default"]["NAME"] = name
        connection.settings_dict["NAME"] = name
        call_command("migrate", verbosity=0)
        yield database_url({**base, "NAME": name})
    finally:
        connection.close()
        settings.DATABASES["default"]["NAME"] = base["NAME"]
        connection.settings_dict["NAME"] = base["NAME"]
        if not keep:
            _drop(admin, name)
