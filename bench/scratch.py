"""A scratch database for one benchmark: a copy of an empty migrated database, made the current
connection's database, and dropped afterwards (unless kept), so a benchmark never touches real
rows.

Migrating an empty database takes seconds (about 60 migrations of DDL); copying one takes a
fraction of a second. So the first benchmark migrates `<configured name>_bench_template` once
and every scratch database is `CREATE DATABASE ... TEMPLATE` of it. The template's comment holds
a fingerprint of every migration file; a changed or added migration makes it anew. It is an
empty schema and may be dropped at any time."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader

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


def migrations_fingerprint() -> str:
    """A digest of every migration's name and source: equal exactly when migrating an empty
    database would build the same schema."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    digest = hashlib.sha256()
    for key in sorted(loader.disk_migrations):
        digest.update(repr(key).encode())
        digest.update(inspect.getsource(inspect.getmodule(loader.disk_migrations[key])).encode())
    return digest.hexdigest()[:32]


def _migrate(base: dict[str, Any], name: str) -> None:
    """Runs `migrate` on `name` through Django's connection, then points it back at `base`."""
    try:
        connection.close()
        settings.DATABASES["default"]["NAME"] = name
        connection.settings_dict["NAME"] = name
        call_command("migrate", verbosity=0)
    finally:
        connection.close()
        settings.DATABASES["default"]["NAME"] = base["NAME"]
        connection.settings_dict["NAME"] = base["NAME"]


def _create_from_template(base: dict[str, Any], admin: dict[str, str], name: str) -> None:
    """`name` as a copy of the migrated template, which is made (again) first when it is missing
    or its fingerprint is not the migrations' own. An advisory lock keeps two benchmarks from
    building it at once, and from copying it while it is being built (a copy needs the template
    to have no session)."""
    template = f"{base['NAME']}_bench_template"
    fingerprint = migrations_fingerprint()
    with psycopg.connect(autocommit=True, **admin) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [template])
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [template],
        ).fetchone()
        if row is None or row[0] != fingerprint:
            conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{template}"')
            _migrate(base, template)
            conn.execute(f"COMMENT ON DATABASE \"{template}\" IS '{fingerprint}'")
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [template])


@contextmanager
def database(suffix: str, *, keep: bool = False, reuse: bool = False) -> Iterator[str]:
    """`<configured name>_<suffix>`, migrated and current; yields its URL. With `reuse`, one
    left by an earlier run (`keep`) is kept as it is and migrated forward, not made anew."""
    base = dict(settings.DATABASES["default"])
    name = f"{base['NAME']}_{suffix}"
    admin = admin_conninfo(base)
    if reuse and _exists(admin, name):
        _migrate(base, name)
    else:
        _drop(admin, name)
        _create_from_template(base, admin, name)
    try:
        connection.close()
        settings.DATABASES["default"]["NAME"] = name
        connection.settings_dict["NAME"] = name
        yield database_url({**base, "NAME": name})
    finally:
        connection.close()
        settings.DATABASES["default"]["NAME"] = base["NAME"]
        connection.settings_dict["NAME"] = base["NAME"]
        if not keep:
            _drop(admin, name)
