"""`python -m bench` end to end at toy sizes: every workload runs, cleans up, and its own checks
hold (nothing claimed or run twice, every run recorded). Figures are not asserted: benchmarks
print figures; docs/benchmarks.md has them at full size."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from tests.conftest import ROOT, process_env

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True, scope="module")
def _no_template_left() -> Iterator[None]:
    """The benchmarks copy their scratch databases from one migrated template; the test
    database's own goes with this module."""
    yield
    template = f"{connection.settings_dict['NAME']}_bench_template"
    with psycopg.connect(dbname="postgres", **_conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')


def bench(*args: str, timeout: float = 240, scratch: str = "bench") -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", *args],
        env=process_env(LOG_LEVEL="WARNING"),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout
    scratch = f"{connection.settings_dict['NAME']}_{scratch}"
    with psycopg.connect(
        dbname="postgres", **_conninfo(), autocommit=True
    ) as conn:  # the scratch database is gone
        assert (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [scratch]).fetchone()
            is None
        )
    return lines


def _conninfo() -> dict:
    s = connection.settings_dict
    info = {"user": s["USER"] or "postgres"}
    for key, name in (("HOST", "host"), ("PORT", "port"), ("PASSWORD", "password")):
        if s.get(key):
            info[name] = str(s[key])
    return info


def test_raw_throughput_and_lateness() -> None:
    raw = bench("raw", "--workers", "2", "--raw-jobs", "300", "--batch", "1,10", "--repeat", "1")
    assert {r["batch"] for r in raw} == {1, 10}
    for r in raw:
        assert (r["succeeded"], r["claimed_twice"], r["history_mismatch"]) == (300, 0, 0)

    (run,) = [r for r in bench("throughput", "--workers", "2", "--n", "300", "--repeat", "1")]
    assert (run["succeeded"], run["attempts_recorded"], run["ran_twice"]) == (300, 300, 0)
    assert run["rate"] > 0

    (late,) = bench("lateness", "--workers", "2", "--jobs", "40", "--window", "2")
    assert (late["early"], late["missing"], late["ran_twice"]) == (0, 0, 0)

    (cycle,) = bench("cycle", "--n", "300", "--concurrency", "2")
    assert cycle["finished"] == 300 and cycle["cycles"] > 0
    assert cycle["recorded_per_cycle"] > 0 and cycle["backend_cpu_seconds"] >= 0


def test_throughput_with_a_key_interleaves_keyed_and_unkeyed_rounds_and_gives_their_ratio() -> None:
    lines = bench(
        "throughput", "--workers", "2", "--n", "200", "--repeat", "1", "--key-limit", "50"
    )
    rounds = [r for r in lines if "key_limit" in r]
    assert [r["key_limit"] for r in rounds] == [None, 50]  # unkeyed first, then keyed
    for r in rounds:
        assert (r["succeeded"], r["attempts_recorded"], r["ran_twice"]) == (200, 200, 0)
    (ratio,) = [r["keyed_over_unkeyed"] for r in lines if "keyed_over_unkeyed" in r]
    assert ratio == round(rounds[1]["rate"] / rounds[0]["rate"], 2)


def test_history_scheduler_and_soak() -> None:
    *_, result = bench("history", "--rows", "3000", "--n", "200", "--repeat", "1", "--workers", "2")
    assert result["workload"] == "history"
    assert result["claim_with_history"]["on_partial_claim_index"]
    assert not result["claim_with_history"]["seq_scan_on_tasks_run"]
    assert len(result["rates_with_history"]) == 1

    # First occurrences are 45 s out and the look-ahead is 30 s: planning starts after ~15 s.
    lines = bench("scheduler", "--tasks", "300", "--seconds", "25", "--schedulers", "1")
    (scheduler,) = [r for r in lines if r.get("workload") == "scheduler"]
    assert scheduler["materialised"] > 0 and scheduler["skipped"] == 0

    lines = bench(
        "soak",
        "--runs",
        "300",
        "--minutes",
        "0.2",
        "--api-runs",
        "2000",
        "--api-requests",
        "50",
        "--api-workers",
        "1",
    )
    soak = next(r for r in lines if "ran_twice" in r)
    assert (soak["succeeded"], soak["ran_twice"]) == (300, 0)
    api = next(r for r in lines if "rss_before_mb" in r)
    assert set(api["statuses"]) == {"200"}


def test_recurring_notify_and_admin() -> None:
    (late,) = bench(
        "recurring",
        "--tasks",
        "3",
        "--seconds",
        "4",
        "--schedulers",
        "1",
        "--workers",
        "1",
        scratch="lateness",
    )
    assert (late["missing"], late["ran_twice"], late["early"]) == (0, 0, 0)
    assert late["occurrences"] > 0

    (mix,) = bench(
        "mix",
        "--intervals",
        "2",
        "--crons",
        "1",
        "--seconds",
        "4",
        "--schedulers",
        "2",
        "--workers",
        "1",
        scratch="mix",
    )
    assert (mix["missing"], mix["duplicates"], mix["early"], mix["deadlocks"]) == (0, 0, 0, 0)
    assert mix["occurrences"] > 0 and mix["floor"]["samples"] > 0

    # notify runs on the configured database with its own user, removed afterwards.
    (notified,) = bench("notify", "--runs", "3", "--workers", "1", "--json")
    assert (notified["missing"], notified["duplicates"], notified["bad_signatures"]) == (0, 0, 0)

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "admin",
            "--runs",
            "6000",
            "--tasks",
            "500",
            "--repeat",
            "1",
        ],
        env=process_env(LOG_LEVEL="WARNING"),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "user: dashboard 7 d" in done.stdout and "runs: page 50" in done.stdout
    assert "floor (password-changed page)" in done.stdout


def test_api_find_max_doubles_until_a_miss_then_bisects() -> None:
    from bench.api import _next_rate

    assert _next_rate(150, passing=0, failing=0) == 300
    assert _next_rate(150, passing=150, failing=0) == 300
    assert _next_rate(150, passing=150, failing=300) == 225
    assert _next_rate(150, passing=225, failing=300) == 262.5
    assert _next_rate(150, passing=262.5, failing=275) is None  # within a tenth of 150
    assert _next_rate(150, passing=0, failing=150) == 75  # nothing met yet: halve
    assert _next_rate(150, passing=0, failing=8) is None


def test_api_against_its_floor_with_a_scheduler_and_a_worker() -> None:
    lines = bench("api", "--rate", "20", "--writes", "2", "--seconds", "3", "--api-workers", "1")
    alone = next(r for r in lines if r["workload"] == "api service time")
    assert set(alone["by_endpoint"]) == {
        "floor",
        "task_list",
        "task_detail",
        "task_runs",
        "run_detail",
    }
    assert alone["by_endpoint"]["floor"]["x_floor"] == 1.0
    assert all(f["median_ms"] > 0 for f in alone["by_endpoint"].values())
    saturated = next(r for r in lines if r["workload"] == "api saturated throughput")
    assert saturated["reads"]["errors"] == saturated["floor"]["errors"] == 0
    assert saturated["reads"]["per_second"] > 0 and saturated["reads_x_floor"] > 0
    (load,) = [r for r in lines if r["workload"] == "api"]
    assert load["errors"] == 0 and load["by_endpoint"]["create"]["n"] == 6


def test_plans_times_the_apis_reads_under_each_mode() -> None:
    lines = bench("plans", "--repeat", "8", scratch="plans")
    reads = [r for r in lines if r["workload"] == "api prepared reads"]
    by_mode = {r["plan_cache_mode"]: r for r in reads if r["prepared_statements"]}
    assert set(by_mode) == {"auto", "force_generic_plan"}
    [unprepared] = [r for r in reads if not r["prepared_statements"]]
    assert (unprepared["generic_plans"], unprepared["custom_plans"]) == (None, None)
    for r in by_mode.values():
        assert set(r["median_ms"]) == {"task", "list page", "a task's runs", "a run"}
        assert all(ms > 0 for ms in r["median_ms"].values())
    generic = by_mode["force_generic_plan"]
    assert (generic["generic_plans"], generic["custom_plans"]) == (4 * 8, 0)
    assert by_mode["auto"]["custom_plans"] >= 4 * 5  # each read planned anew at least five times


def test_tasksets_plans_applies_and_deletes_a_set() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "tasksets", "--n", "20"],
        env=process_env(LOG_LEVEL="WARNING"),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "apply, 20 updates" in done.stdout and "delete, 20 tasks" in done.stdout


def test_workflow_fans_out_and_hands_off_against_plain_runs() -> None:
    (result,) = bench("workflow", "--n", "20", "--rounds", "2", scratch="workflow")
    assert result["independent"]["runs"] == 20
    fan = result["fan_out"]
    assert fan["children"] == 20 and fan["rate"] > 0
    assert fan["join_after_last_child_ms"] >= 0  # the join never starts before a child ends
    assert result["rounds"] == 2 and result["hand_off"]["p50_ms"] >= 0


def test_visible_reads_a_members_page_by_its_parts() -> None:
    [result] = bench(
        "visible",
        "--others",
        "2",
        "--tasks",
        "120",
        "--own",
        "20",
        "--repeat",
        "2",
        scratch="visible",
    )
    assert (result["tasks"], result["visible"]) == (2 * 120 + 3 * 120 + 20 + 260, 260)
    assert all(
        result[f"{who}_{read}_ms"] > 0
        for who in ("member", "solo")
        for read in ("call", "named", "page", "count", "count_or")
    )
    # The member's count by parts: each team's rows from its index alone, not the table.
    counted = result["plans"]["member"]["count"]
    assert re.search(r"task_team_created_id_idx only \(240 rows\)", counted), counted
    # The member's page: each team's first 50 (and one, to end a tie) by its (team, created_at,
    # id) index, read index-only, not all 240 of the two teams. At this size the page's outer
    # query may read that index whole too, as the table's smallest copy of (id, created_at): the
    # plan's summary adds those rows, at most the table's.
    page = result["plans"]["member"]["page"]
    read = re.search(r"task_team_created_id_idx only \((\d+) rows\)", page)
    assert read is not None and int(read[1]) <= 2 * 51 + result["tasks"], page
