"""`bench day`'s profile: a statement as pg_stat_statements shows it maps to its family (by the
named SQL file it comes from, or by its text), and the profile prints as a table."""

from __future__ import annotations

import itertools
import re
from importlib import resources

import pytest

from bench import statement_families
from bench.day_profile import Statement, print_profile, profile, rows
from bench.statement_families import NAMED, family, named, normalise
from scheduler_project.sql import Statements
from tasks.transitions import claim


def as_pg_stat_statements(sql: str) -> str:
    """`sql` as pg_stat_statements keeps it: each parameter and constant a `$n` (its comments
    left out here, where an apostrophe would look like a string's)."""
    counter = itertools.count(1)
    text = re.sub(r"--[^\n]*", "", sql)
    text = re.sub(r"%\(\w+\)s|%s", lambda _: f"${next(counter)}", text)
    text = re.sub(r"'(?:[^']|'')*'", lambda _: f"${next(counter)}", text)
    text = re.sub(r"\bNULL\b(?=::)", lambda _: f"${next(counter)}", text)
    return re.sub(r"extract\(epoch", lambda _: f"extract(${next(counter)}", text)


def test_the_claim_cycle_as_the_worker_sends_it_maps_to_its_statement_and_family() -> None:
    sent = claim.SQL.render("cycle", candidates=8, executables=0)
    seen = as_pg_stat_statements(sent)
    assert seen != sent and "$1" in seen
    assert named(seen) == "tasks/claim.sql:cycle"
    assert family(seen) == "worker: claim cycle"
    assert family(as_pg_stat_statements(claim.SQL["renew_heartbeats"])) == "worker: heartbeats"


def test_an_api_list_page_with_the_orms_queries_in_its_slots_maps_to_the_task_list() -> None:
    from tasks.api.json_sql import _statements

    page = (
        'SELECT "tasks_task"."id", ROW_NUMBER() OVER (ORDER BY "created_at" DESC) FROM'
        ' "tasks_task" WHERE "tasks_task"."owner_id" = %s',
        [1],
    )
    counted = (
        'SELECT "tasks_task"."id" AS "pk" FROM "tasks_task" WHERE'
        ' ("tasks_task"."owner_id" = %s AND "tasks_task"."team_id" IS NULL)',
        [1],
    )
    sql = _statements().compose("tasks_page", {}, page=page, counted=counted)
    assert family(as_pg_stat_statements(sql)) == "API: task list"
    # The default list's one statement is the task list too, not "other reads".
    visible = _statements()["tasks_visible_page"]
    assert family(as_pg_stat_statements(visible)) == "API: task list"
    by_ids = _statements()["tasks_by_ids"]
    assert family(as_pg_stat_statements(by_ids)) == "API: task detail"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ('DELETE FROM "tasks_run" WHERE "tasks_run"."id" IN ($1::uuid, $2::uuid)', "retention"),
        (
            'SELECT $2 FROM ONLY "public"."tasks_task" x WHERE "id" OPERATOR(pg_catalog.=) $1'
            " FOR KEY SHARE OF x",
            "foreign key checks",
        ),
        ('INSERT INTO "tasks_task" ("id", "name") VALUES ($1::uuid, $2)', "API: create"),
        ("SELECT $1", "SELECT 1 (the harness's floor, Django's health checks)"),
        ("SELECT clock_timestamp()", "other"),
    ],
)
def test_what_the_orm_writes_maps_by_its_text(sql: str, expected: str) -> None:
    assert named(sql) is None
    assert family(sql) == expected


def test_normalise_takes_out_values_casts_and_comments() -> None:
    a = "SELECT a FROM t -- why\n WHERE b = %(b)s::timestamptz AND c IN (1, 2, 3) AND d = NULL"
    b = "select a from t where b = $1 and c in ($2, $3) and d = $4::text"
    assert normalise(a) == normalise(b) == "select a from t where b=? and c in(?)and d=?"


def test_every_named_family_is_a_statement_or_file_the_loader_reads() -> None:
    texts = statement_families._named_texts()
    for key in NAMED:
        if ":" in key:
            assert key in texts, key
        else:
            app, filename = key.split("/")
            text = (resources.files(app) / "sql" / filename).read_text(encoding="utf-8")
            assert Statements(text, {}).declared is not None


def test_the_profile_is_per_run_and_per_request_of_its_endpoint_and_prints() -> None:
    statements = [
        Statement(
            as_pg_stat_statements(claim.SQL.render("cycle", candidates=8, executables=0)),
            calls=100,
            plans=4,
            exec_ms=300,
            plan_ms=100,
        ),
        Statement("SELECT clock_timestamp()", calls=10, exec_ms=1.0),
    ]
    p = profile(
        statements,
        cpu={"workers": 2.0, "API (2 gunicorn)": 4.0},
        runs=200,
        requests={"task_list": 50, "floor": 50},
    )
    first = p["families"][0]
    assert first["family"] == "worker: claim cycle"
    assert first["ms_per_run"] == 2.0 and first["ms_per_call"] == 4.0
    assert p["cpu"][0] == {
        "group": "API (2 gunicorn)",
        "cpu_s": 4.0,
        "ms_per_run": 20.0,
        "ms_per_request": 40.0,
    }
    table = rows(p)
    assert table[2].startswith("| worker: claim cycle | 100 | 4 | 0.3 + 0.1 | 4.000 | 2.000 |")
    printed: list[str] = []
    print_profile(p, lambda line="": printed.append(line))
    assert any("| other | 10 |" in line for line in printed)
    assert "200 runs executed" in printed[1]
