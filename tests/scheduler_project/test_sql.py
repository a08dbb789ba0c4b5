"""The named SQL files: parsing, includes, fragments with arguments, the ORM's queries written
in, descriptions, and that the product's writes live in them."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest
from django.db import connection

from scheduler_project.sql import Statements, parse, queries

ROOT = Path(__file__).resolve().parents[2]
APPS = ("scheduler_project", "tasks", "notifications", "reviewers")


def test_statements_are_split_at_markers_and_include_each_other() -> None:
    text = """-- about this file
-- name: ctes
picked AS (SELECT 1 WHERE '{{}}' <> '{{x}}')
-- describes `full`, not part of `ctes`
-- name: full
WITH {ctes} SELECT * FROM picked
"""
    found = parse(text)
    assert found["ctes"] == "picked AS (SELECT 1 WHERE '{}' <> '{x}')"
    assert found["full"] == "WITH picked AS (SELECT 1 WHERE '{}' <> '{x}') SELECT * FROM picked"


LITERALS = """-- literal: batch
-- literal: cap
-- name: inner
SELECT id FROM t LIMIT {cap}
-- name: outer
WITH i AS ({inner}) SELECT '{{}}'::int[], id FROM i LIMIT {batch}
"""


def test_declared_literals_are_written_in_fixed_or_per_variant() -> None:
    statements = Statements(LITERALS, {"cap": 100})

    assert statements["inner"] == "SELECT id FROM t LIMIT 100"
    assert statements.needs("outer") == {"batch"}
    assert statements.render("outer", batch=8) == (
        "WITH i AS (SELECT id FROM t LIMIT 100) SELECT '{}'::int[], id FROM i LIMIT 8"
    )
    with pytest.raises(ValueError, match="needs the literal"):
        statements["outer"]
    assert "outer" in statements and "batch" not in statements
    with pytest.raises(ValueError, match="takes the literal"):
        statements.render("outer")
    with pytest.raises(TypeError, match="must be an int"):
        statements.render("outer", batch="8; DROP TABLE t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not declared"):
        Statements(LITERALS, {"cap": 1, "other": 2})


FRAGMENTS = """-- literal: cap
-- query: listed
-- A time as text.
-- name: shown(at)
to_char({at}, 'YYYY')
-- The listed rows' times, at most `cap`.
-- name: times
SELECT {shown(t.created_at)}, {shown(%(at)s::timestamptz)}, '{{}}'
  FROM ({listed}) AS l JOIN t ON t.id = l.id LIMIT {cap}
"""


def test_fragments_take_arguments_and_statements_take_the_orms_queries() -> None:
    statements = Statements(FRAGMENTS, {"cap": 5})
    assert statements.parameters("shown") == ("at",)
    assert statements.needs("times") == {"listed"}
    params = {"at": 1}
    sql = statements.compose(
        "times", params, listed=("SELECT id FROM t WHERE a = %s AND b IN (%s, %s)", [7, 8, 9])
    )
    assert sql == (
        "SELECT to_char(t.created_at, 'YYYY'), to_char(%(at)s::timestamptz, 'YYYY'), '{}'\n"
        "  FROM (SELECT id FROM t WHERE a = %(listed_0)s AND b IN (%(listed_1)s, %(listed_2)s))"
        " AS l JOIN t ON t.id = l.id LIMIT 5"
    )
    assert params == {"at": 1, "listed_0": 7, "listed_1": 8, "listed_2": 9}
    assert "shown" not in statements and statements.fragments() == ("shown",)
    with pytest.raises(KeyError):
        statements["shown"]  # included only
    with pytest.raises(KeyError):
        statements.compose("shown", {})
    with pytest.raises(ValueError, match="needs the literal"):
        statements["times"]
    with pytest.raises(ValueError, match="takes the query"):
        statements.compose("times", {})
    with pytest.raises(ValueError, match="unexpected placeholders"):
        statements.compose("times", {}, listed=("SELECT id FROM t WHERE a = %s", []))
    assert parse(FRAGMENTS.replace("{listed}", "SELECT 1"), cap=1).keys() == {"times"}


def test_a_statements_description_is_the_comment_just_above_its_marker() -> None:
    statements = Statements(
        "-- A file.\n-- literal: cap\n-- name: a\nSELECT 1\n"
        "-- B's first line,\n--   and its second.\n-- name: b\nSELECT 2\n"
        "-- Not c's: a blank line follows.\n\n-- name: c\nSELECT 3\n",
        {},
    )
    assert [statements.description(name) for name in "abc"] == [
        "",
        "B's first line, and its second.",
        "",
    ]


def test_every_statement_of_the_apps_has_a_description() -> None:
    missing = [
        (str(path.relative_to(ROOT)), name)
        for path in sorted(ROOT.glob("*/sql/*.sql"))
        for statements in [queries(path.parts[-3], path.name)]
        for name in [*statements, *statements.fragments()]
        if not statements.description(name)
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n", "defined twice"),
        ("-- name: a\nSELECT {b}\n-- name: b\nSELECT {a}\n", "includes itself"),
        # A brace that is neither an include, a declared literal nor an escape.
        ("-- name: a\nSELECT '{}'::int[]\n", "lone '{'"),
        ("-- name: a\nSELECT 1 WHERE x <> '{{}'\n", "lone '}'"),
        ("-- name: a\nSELECT '{\"id\": 1}'::jsonb\n", "lone '{'"),
        ("-- name: a\nSELECT 1 LIMIT {candidates}\n", "neither a statement nor a declared"),
        ("-- literal: a\n-- name: a\nSELECT 1\n", "both a statement and a literal"),
        ("-- query: a\n-- literal: a\n-- name: b\nSELECT 1\n", "both a literal and a query"),
        ("-- name: f(x)\n{x} + 1\n-- name: a\nSELECT {f}\n", "with 0 argument"),
        ("-- name: f(x)\n{x} + 1\n-- name: a\nSELECT {f(1, 2)}\n", "with 2 argument"),
        ("-- name: f\n1\n-- name: a\nSELECT {f(1)}\n", "with 1 argument"),
        ("-- name: a\nSELECT {g(1)}\n", "neither a statement nor a declared"),
        ("-- name: f(a)\n{a}\n-- name: a\nSELECT 1\n", "also named"),
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
    # Writes and claims live in .sql files; SELECT-only reads may stay in Python.
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


# A query's keywords; session commands (LISTEN on a channel constant, SET of a validated setting)
# are not queries.
QUERY = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS)\b")
# The embedded server's own psql, run on the database it has just started (no user input).
F_STRING_QUERIES_ALLOWED = {"scheduler_project/embedded_db.py"}


def f_string_queries(source: str) -> list[str]:
    """The f-strings of `source` that hold a query."""
    return [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.STRING
        and "f" in token.string[: token.string.index(token.string[-1])].lower()
        and QUERY.search(token.string)
    ]


def test_the_f_string_check_finds_a_query_however_it_is_quoted() -> None:
    source = (
        'a = f"SELECT {x} FROM t"\n'
        "b = rf'''UPDATE t SET c = {y}'''\n"
        'c = "SELECT 1"\n'
        'd = f"LISTEN {channel}"\n'
        'e = F"""\nWITH a AS (SELECT 1) SELECT {y}"""\n'
    )
    assert f_string_queries(source) == [
        'f"SELECT {x} FROM t"',
        "rf'''UPDATE t SET c = {y}'''",
        'F"""\nWITH a AS (SELECT 1) SELECT {y}"""',
    ]


def test_no_python_module_of_the_apps_builds_a_query_with_an_f_string() -> None:
    # Queries are named in .sql files; the loader alone writes in what a statement declares.
    offenders = {
        str(path.relative_to(ROOT))
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
        if f_string_queries(path.read_text(encoding="utf-8"))
    }
    assert offenders == F_STRING_QUERIES_ALLOWED


@pytest.mark.django_db
def test_the_migrated_enqueue_function_is_the_files() -> None:
    text = queries("notifications", "functions.sql")["notifications_enqueue"]
    body = text.split("$$")[1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = 'notifications_enqueue'")
        assert [row[0] for row in cursor.fetchall()] == [body]
