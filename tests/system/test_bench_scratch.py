"""bench/scratch.py: a scratch database is a copy of a migrated template, made once per set of
migrations: a second scratch database copies the same template, a changed migration set makes it
anew, and the scratch database is gone afterwards."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from bench import scratch

pytestmark = pytest.mark.django_db(transaction=True)


def _template(admin: dict[str, str], name: str) -> tuple[int, str] | None:
    with psycopg.connect(autocommit=True, **admin) as conn:
        row = conn.execute(
            "SELECT oid, shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [name],
        ).fetchone()
    return None if row is None else (row[0], row[1])


def _applied() -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations")
        return set(cursor.fetchall())


def test_scratch_databases_copy_one_template_per_migration_set(monkeypatch) -> None:
    base = connection.settings_dict["NAME"]
    admin = scratch.admin_conninfo(dict(connection.settings_dict))
    template = f"{base}_bench_template"
    expected = _applied()

    with scratch.database("copy1"):
        assert connection.settings_dict["NAME"] == f"{base}_copy1"
        assert _applied() == expected  # migrated as far as the test database
    first = _template(admin, template)
    assert first is not None and first[1] == scratch.migrations_fingerprint()

    with scratch.database("copy2"):
        assert _applied() == expected
    assert _template(admin, template) == first  # copied again, not made anew

    monkeypatch.setattr(scratch, "migrations_fingerprint", lambda: "another migration set")
    with scratch.database("copy3"):
        assert _applied() == expected
    remade = _template(admin, template)
    assert remade is not None and remade[0] != first[0] and remade[1] == "another migration set"

    assert connection.settings_dict["NAME"] == base
    with psycopg.connect(autocommit=True, **admin) as conn:
        left = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY datname",
            [f"{base}_copy%"],
        ).fetchall()
        conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
    assert left == []
