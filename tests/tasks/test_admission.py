"""Why a run waits is tasks.admission's table: its docstring, `WAITS`, the database's CHECK and
the statements that write `wait_kind` say the same, and nothing reads the words back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

from tasks import admission
from tasks.admission import WAIT_KINDS, WAITS, Wait

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("tasks", "reviewers", "notifications", "scheduler_project")
ROW = re.compile(r"^    (\S.*?)  +(\S+)  +(\S.*?)  +(\S.*)$")
WORDS = re.compile(r'^        "(.*)"$')


def table_rows(doc: str) -> list[Wait]:
    """The docstring's table: a row line, then its words, indented further."""
    lines = doc.split("    reason ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    rows = []
    for row, words in zip(lines[0::2], lines[1::2], strict=True):
        found, said = ROW.match(row), WORDS.match(words)
        assert found and said, (row, words)
        reason, kind, decided, released = found.groups()
        rows.append(Wait(reason, "" if kind == "-" else kind, decided, released, said[1]))
    return rows


def test_the_table_in_the_docstring_is_the_table_in_the_code() -> None:
    assert table_rows(admission.__doc__ or "") == list(WAITS)


def test_the_table_reader_sees_a_row_that_differs() -> None:
    doc = (admission.__doc__ or "").replace("the claim that starts it", "the reviewer")
    assert table_rows(doc) != list(WAITS)


@pytest.mark.django_db
def test_the_check_constraint_admits_exactly_the_kinds() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'run_wait_kind_valid'"
        )
        [definition] = cursor.fetchone()
    assert tuple(re.findall(r"'([^']*)'::", definition)) == WAIT_KINDS


def sql_texts() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for app in PRODUCT
        for path in sorted((ROOT / app).glob("sql/*.sql"))
    }


def kinds_written(sql: str) -> set[str]:
    """The kinds a statement compares or writes: `wait_kind = 'x'`, `wait_kind IN ('x', ...)`,
    and the `'x' AS kind` of a statement that writes `wait_kind = <its source>.kind`."""
    found = set(re.findall(r"wait_kind\s*<?>?=\s*'(\w*)'", sql))
    for group in re.findall(r"wait_kind\s+IN\s*\(([^)]*)\)", sql):
        found |= set(re.findall(r"'(\w*)'", group))
    found |= set(re.findall(r"'(\w+)' AS kind", sql))
    return found


def test_every_kind_a_statement_names_is_in_the_table_and_every_marking_kind_is_written() -> None:
    named = set().union(*(kinds_written(sql) for sql in sql_texts().values()))
    assert named <= set(WAIT_KINDS), named - set(WAIT_KINDS)
    assert {w.kind for w in WAITS if w.kind} <= named, {w.kind for w in WAITS} - named


PREFIX_MATCH = re.compile(
    r"(wait_reason|\berror)\s+(NOT\s+)?I?LIKE\s+'"
    r"|starts_with\(\s*[\w.]*(wait_reason|error)\b"
    r"|(wait_reason|\berror)\.startswith\("
    r"|(wait_reason|\berror)__i?startswith="
)


def prefix_matches(text: str) -> list[str]:
    return [m.group(0) for m in PREFIX_MATCH.finditer(text)]


@pytest.mark.parametrize(
    "text",
    [
        "AND r.wait_reason LIKE 'no live worker offers %%'",
        "WHERE starts_with(r.wait_reason, %(prefix)s)",
        "starts_with(wait_reason, 'rate limit ')",
        "if run.wait_reason.startswith('waiting for'):",
        "if error.startswith(prefix):",
        "WHERE r.error NOT LIKE 'missed:%%'",
        "Run.objects.filter(error__startswith=EXCLUDED_PREFIX)",
    ],
)
def test_the_prefix_check_finds_each_form(text: str) -> None:
    assert prefix_matches(text)


def test_no_statement_or_module_reads_why_a_run_waits_from_its_words() -> None:
    files = dict(sql_texts())
    for app in PRODUCT:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                files[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    found = {name: prefix_matches(text) for name, text in files.items() if prefix_matches(text)}
    assert found == {}
