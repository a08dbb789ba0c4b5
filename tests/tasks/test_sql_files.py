"""The named SQL files: parsing, includes, and that the product's writes live in them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

from scheduler_project.sql import parse, queries

ROOT = Path(__file__).resolve().parents[2]
APPS = ("scheduler_project", "tasks", "notifications", "reviewers")


def test_statements_are_split_at_markers_and_include_each_other() -> None:
    text = """-- about this file
-- name: ctes
picked AS (SELECT 1 WHERE '{}' <> '{x}')
-- describes `full`, not part of `ctes`
-- name: full
WITH {ctes} SELECT {candidates} FROM picked
"""
    found = parse(text)
    assert found["ctes"] == "picked AS (SELECT 1 WHERE '{}' <> '{x}')"
    assert found["full"] == (
        "WITH picked AS (SELECT 1 WHERE '{}' <> '{x}') SELECT {candidates} FROM picked"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n", "defined twice"),
        ("-- name: a\nSELECT {b}\n-- name: b\nSELECT {a}\n", "includes itself"),
    ],
)
def test_bad_files_are_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse(text)


def test_every_sql_file_of_the_apps_parses() -> None:
    files = sorted(ROOT.glob("*/sql/*.sql"))
    assert len(files) >= 10
    for path in files:
        assert queries(path.parts[-3], path.name), path


def test_no_python_module_of_the_apps_holds_a_write_statement() -> None:
    # Writes and claims live in .sql files (issue 12); SELECT-only reads may stay in Python.
    write = re.compile(
        r"INSERT\s+INTO|UPDATE\s+\w+(\s+\w+)?\s+SET|CREATE\s+(OR\s+REPLACE\s+)?FUNCTION"
        r"|FOR\s+UPDATE\s+(OF\s+\w+\s+)?SKIP\s+LOCKED\s*\)"
    )
    offenders = [
        str(path.relative_to(ROOT))
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and "bench" not in path.parts
        if write.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.mark.django_db
def test_the_migrated_enqueue_function_is_the_files() -> None:
    text = queries("notifications", "functions.sql")["notifications_enqueue"]
    body = text.split("$$")[1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'notifications_enqueue'")
        assert [row[0] for row in cursor.fetchall()] == [body]
