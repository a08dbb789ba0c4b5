"""Migrations give the current definitions: the functions, triggers and indexes that the apps'
`sql/*.sql` files define are, in a freshly migrated database, exactly what those files say.

Each migration applies its own frozen SQL, so an edit of a live file changes nothing a migration
does: it needs a new migration, and this test fails until that exists. The test database is the
fresh database (pytest-django migrates it from nothing); the live files are applied to a scratch
schema holding empty copies of the tables, and the two schemas' definitions are compared.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

from scheduler_project.sql import queries

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = "live_definitions"
# Statements that define schema objects (a file's other statements are the application's).
DEFINES = re.compile(
    r"^\s*CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|TRIGGER|(UNIQUE\s+)?INDEX)\b",
    re.IGNORECASE | re.MULTILINE,
)

# Every definition of a schema, keyed by kind and name, as PostgreSQL prints it (names
# schema-qualified: the catalog is the only schema on the path while these are printed).
_DEFINITIONS_SQL = """
SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       pg_get_functiondef(p.oid)
  FROM pg_proc p WHERE p.pronamespace = %(schema)s::regnamespace AND p.prokind IN ('f', 'p')
   AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
UNION ALL
SELECT 'trigger', c.relname || '.' || t.tgname,
       pg_get_triggerdef(t.oid) || ' -- enabled: ' || t.tgenabled::text
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = %(schema)s::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'index', i.relname, pg_get_indexdef(i.oid)
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
 WHERE i.relnamespace = %(schema)s::regnamespace
"""


def live_definitions() -> list[tuple[str, str]]:
    """(file, statement) for each statement of the apps' SQL files that defines an object."""
    found = []
    for path in sorted(ROOT.glob("*/sql/*.sql")):
        statements = queries(path.parts[-3], path.name)
        # A statement that needs a literal per use (the claim's LIMIT) defines nothing.
        for statement in (statements[name] for name in statements if not statements.needs(name)):
            if DEFINES.search(statement):
                found.append((f"{path.parts[-3]}/sql/{path.name}", statement))
    return found


def _definitions(cursor, schema: str) -> dict[tuple[str, str], str]:
    cursor.execute("SET LOCAL search_path = pg_catalog")
    cursor.execute(_DEFINITIONS_SQL, {"schema": schema})
    return {(kind, name): text.replace(f"{schema}.", "") for kind, name, text in cursor.fetchall()}


def compare(statements: list[str]) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """Each object `statements` define, with its definition in the migrated schema (None when
    missing) and the defined one: {(kind, name): (migrated, defined)}; and each function or
    trigger the migrations left that `statements` do not define, as (migrated, None) (the
    migrated indexes are mostly the models'). Run inside a transaction that is rolled back (the
    scratch schema goes with it)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {SCRATCH}")
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        for (table,) in cursor.fetchall():
            cursor.execute(f'CREATE TABLE {SCRATCH}."{table}" (LIKE public."{table}")')
        # Unqualified names in the statements resolve to the scratch schema first.
        cursor.execute(f"SET LOCAL search_path = {SCRATCH}, public")
        for statement in statements:
            cursor.execute(statement)
        defined = _definitions(cursor, SCRATCH)
        migrated = _definitions(cursor, "public")
    left = {key: (text, None) for key, text in migrated.items() if key[0] != "index"}
    return dict(
        sorted(
            {**left, **{key: (migrated.get(key), text) for key, text in defined.items()}}.items()
        )
    )


def differences(statements: list[str]) -> list[tuple[str, str]]:
    return [key for key, (migrated, defined) in compare(statements).items() if migrated != defined]


@pytest.mark.django_db
def test_the_migrations_give_what_the_sql_files_define() -> None:
    statements = live_definitions()
    assert {name for name, _ in statements} >= {
        "tasks/sql/run_summary.sql",
        "notifications/sql/functions.sql",
    }
    compared = compare([text for _, text in statements])
    assert set(compared) >= {
        (
            "function",
            "tasks_run_summary(p_id uuid, p_scheduled_at timestamp with time zone, "
            "p_status text, p_attempt integer, p_started_at timestamp with time zone, "
            "p_finished_at timestamp with time zone)",
        ),
        ("trigger", "tasks_run.run_summary_on_update"),
    }
    assert [key for key, (migrated, defined) in compared.items() if migrated != defined] == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        # A function's body, a trigger's timing, a trigger left enabled only by default, a
        # function renamed (one no migration created, one the files no longer define).
        (("'.000000Z', 'Z')", "'.000000Z', 'Z') || ''"), {("function", "tasks_run_summary")}),
        (("BEFORE INSERT ON", "AFTER INSERT ON"), {("trigger", "tasks_run.run_summary_on_insert")}),
        (
            ("ALTER TABLE tasks_run ENABLE ALWAYS TRIGGER run_summary_on_update;", ""),
            {("trigger", "tasks_run.run_summary_on_update")},
        ),
        (
            ("CREATE OR REPLACE FUNCTION notifications_enqueue(", "CREATE FUNCTION enqueue_v2("),
            {("function", "enqueue_v2"), ("function", "notifications_enqueue")},
        ),
    ],
)
def test_an_edit_of_a_sql_file_without_a_migration_is_found(edit, changed) -> None:
    old, new = edit
    statements = [text for _, text in live_definitions()]
    assert any(old in text for text in statements)
    found = differences([text.replace(old, new) for text in statements])
    assert {(kind, name.split("(")[0]) for kind, name in found} == changed


def test_no_migration_reads_a_file_or_the_live_sql() -> None:
    # What a migration applies is in the migration: no file read, no statement from the
    # loader of the apps' live `.sql` files.
    reads = re.compile(r"\bopen\(|read_text|read_bytes|importlib|tasks\.sql\b|queries\(")
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted(ROOT.glob("*/migrations/*.py"))
        if reads.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
