"""The command line (cli/, `schedctl`) as a subprocess against a real gunicorn on 127.0.0.1:
plan, apply, diff and drift of task set files, the everyday commands, login, offline validate."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import yaml
from django.utils import timezone

from tasks.models import Run, Task, TaskHealth
from tests.conftest import ROOT, free_port
from tests.factories import RunFactory, UserFactory
from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)

pytestmark = pytest.mark.processes

Schedctl = Callable[..., subprocess.CompletedProcess]


def task(key: str, expression: str) -> dict:
    return {
        "key": key,
        "kind": "handler",
        "payload": {"name": "noop"},
        "schedule": {"type": "cron", "expression": expression},
    }


def write(path: Path, tasks: list[dict], name: str = "nightly") -> Path:
    path.write_text(yaml.safe_dump({"name": name, "tasks": tasks}))
    return path


def cli_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """The command line's environment: the checkout's cli/ on the path, a config folder of the
    test's own, and no SCHEDULER_* variable but those given."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULER_")}
    return {
        **inherited,
        "PYTHONPATH": str(ROOT / "cli"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        **env,
    }


def runner(tmp_path: Path, **env: str) -> Schedctl:
    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "schedctl", *args],
            cwd=tmp_path,
            env=cli_env(tmp_path, **env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


@pytest.fixture
def served(gunicorn, tmp_path) -> tuple[str, Schedctl]:  # noqa: F811
    """The API's URL and `schedctl` logged in there as a user of its own."""
    UserFactory(username="ops")
    base = gunicorn(workers=2)
    schedctl = runner(tmp_path, SCHEDULER_URL=base)
    login = schedctl("login", "--username", "ops", "--password", "password-123")
    assert login.returncode == 0, login.stderr
    return base, schedctl


def access_token(base: str) -> str:
    body = {"username": "ops", "password": "password-123"}
    return requests.post(f"{base}/api/v1/auth/token", json=body, timeout=10).json()["access"]


def live(name: str = "nightly") -> dict[str, str]:
    tasks = Task.objects.filter(taskset__name=name).exclude(status="cancelled")
    return {t.taskset_key or "": t.schedule["expression"] for t in tasks}


def test_login_stores_the_refresh_token_for_its_owner_alone(served, tmp_path) -> None:
    stored = tmp_path / "config" / "schedctl" / "config.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert set(json.loads(stored.read_text())) == {"url", "refresh"}


def test_plan_apply_then_an_edit_and_a_removal(served, tmp_path) -> None:
    _, schedctl = served
    three = [task("report", "0 3 * * *"), task("cleanup", "0 4 * * *"), task("backup", "0 5 * * *")]
    path = write(tmp_path / "schedules.yaml", three)

    planned = schedctl("plan", "-f", str(path))
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.count("+ create") == 3
    assert "Plan: 3 to create, 0 to update, 0 to delete" in planned.stdout
    assert not Task.objects.exists()

    refused = schedctl("apply", "-f", str(path), stdin="n\n")
    assert refused.returncode == 1
    assert not Task.objects.exists()

    applied = schedctl("apply", "-f", str(path), "--yes")
    assert applied.returncode == 0, applied.stderr
    assert live() == {"report": "0 3 * * *", "cleanup": "0 4 * * *", "backup": "0 5 * * *"}
    assert "No changes (3 unchanged)" in schedctl("plan", "-f", str(path)).stdout

    write(path, [task("report", "30 3 * * *"), three[1]])
    shown = schedctl("plan", "-f", str(path))
    assert "~ update report" in shown.stdout and "- delete backup" in shown.stdout
    assert 'schedule.expression: "0 3 * * *" -> "30 3 * * *"' in shown.stdout
    [plan] = json.loads(schedctl("plan", "-f", str(path), "--json").stdout)["tasksets"]
    assert len(plan["update"]) == 1 and len(plan["delete"]) == 1 and plan["unchanged"] == 1
    change = plan["update"][0]["changes"]["schedule"]
    assert (change["from"]["expression"], change["to"]["expression"]) == ("0 3 * * *", "30 3 * * *")

    assert schedctl("apply", "-f", str(path), "-y").returncode == 0
    assert live() == {"report": "30 3 * * *", "cleanup": "0 4 * * *"}


def test_an_invalid_entry_names_its_field_and_changes_nothing(served, tmp_path) -> None:
    _, schedctl = served
    path = write(tmp_path / "ok.yaml", [task("a", "0 3 * * *")])
    assert schedctl("apply", "-f", str(path), "--yes").returncode == 0
    write(path, [task("a", "0 9 * * *"), task("b", "0 99 * * *")])

    failed = schedctl("apply", "-f", str(path), "--yes")
    assert failed.returncode == 1
    assert "tasks[1].schedule.expression:" in failed.stderr
    assert live() == {"a": "0 3 * * *"}


def test_diff_catches_an_edit_through_the_api(served, tmp_path) -> None:
    base, schedctl = served
    path = write(tmp_path / "s.yaml", [task("a", "0 3 * * *")])
    schedctl("apply", "-f", str(path), "--yes")
    assert schedctl("diff", "-f", str(path), "--exit-code").returncode == 0

    [pk] = Task.objects.values_list("pk", flat=True)
    headers = {"Authorization": f"Bearer {access_token(base)}"}
    edited = requests.patch(
        f"{base}/api/v1/tasks/{pk}", json={"priority": 8}, headers=headers, timeout=10
    )
    assert edited.status_code == 200
    differs = schedctl("diff", "-f", str(path), "--exit-code")
    assert differs.returncode == 2
    assert "priority: 8 -> 5" in differs.stdout
    assert "priority: declared 5, actual 8" in schedctl("drift", "nightly").stdout

    assert schedctl("apply", "-f", str(path), "--yes").returncode == 0
    assert schedctl("diff", "-f", str(path), "--exit-code").returncode == 0


def test_two_applies_at_once_leave_exactly_one_file(served, tmp_path) -> None:
    base, _ = served
    first = {f"k{i}": f"{i} 1 * * *" for i in range(8)}
    second = {f"k{i}": f"{i} 2 * * *" for i in range(4, 12)}
    files = {
        "first": write(tmp_path / "first.yaml", [task(k, e) for k, e in first.items()]),
        "second": write(tmp_path / "second.yaml", [task(k, e) for k, e in second.items()]),
    }
    environment = cli_env(tmp_path, SCHEDULER_URL=base)
    for _ in range(3):
        started = [
            subprocess.Popen(
                [sys.executable, "-m", "schedctl", "apply", "-f", str(path), "--yes"],
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for path in files.values()
        ]
        for proc in started:
            assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        assert live() in (first, second)


def test_runs_and_tasks_for_people_and_scripts(served, tmp_path) -> None:
    _, schedctl = served
    path = write(tmp_path / "s.yaml", [task("a", "0 3 * * *")])
    schedctl("apply", "-f", str(path), "--yes")
    mine = Task.objects.get()
    ended = {"owner": mine.owner, "finished_at": timezone.now()}
    failed = RunFactory(task=mine, status="failed", error="boom", **ended)
    RunFactory(task=mine, status="succeeded", **ended)

    listed = schedctl("runs", "ls", "--status", "failed", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["status"]) for r in json.loads(listed.stdout)] == [
        (str(failed.pk), "failed")
    ]
    shown = json.loads(schedctl("runs", "get", str(failed.pk), "--json").stdout)
    assert shown["error"] == "boom" and "attempts" in shown

    table = schedctl("tasks", "ls")
    assert table.returncode == 0
    assert "set/key" in table.stdout and "nightly/a" in table.stdout
    assert json.loads(schedctl("tasks", "get", str(mine.pk), "--json").stdout)["key"] == "a"

    assert schedctl("pause", str(mine.pk)).returncode == 0
    assert Task.objects.get().status == "paused"
    assert "status: declared" in schedctl("drift", "nightly").stdout
    assert schedctl("resume", str(mine.pk)).returncode == 0
    assert schedctl("run-now", str(mine.pk), "--json").returncode == 0
    assert Run.objects.filter(task=mine, status="scheduled").exists()
    times = json.loads(schedctl("preview", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--json").stdout)
    assert len(times["next_runs"]) == 5
    refused = schedctl("preview", "0 9 * *")
    assert refused.returncode == 1 and "schedule" in refused.stderr


def test_tasks_ls_filters_by_the_tasks_health(served, tmp_path) -> None:
    base, schedctl = served
    path = write(tmp_path / "s.yaml", [task("a", "0 3 * * *"), task("b", "0 4 * * *")])
    schedctl("apply", "-f", str(path), "--yes")
    failing = Task.objects.get(taskset_key="b")
    expects = requests.patch(
        f"{base}/api/v1/tasks/{failing.pk}",
        json={"expect": {"failure_streak": 1}},
        headers={"Authorization": f"Bearer {access_token(base)}"},
        timeout=10,
    )
    assert expects.status_code == 200, expects.content
    TaskHealth.objects.filter(task=failing).update(health=TaskHealth.Health.FAILING)

    def keys(health: str) -> list[str]:
        listed = schedctl("tasks", "ls", "--health", health, "--json")
        assert listed.returncode == 0, listed.stderr
        return sorted(t["key"] for t in json.loads(listed.stdout))

    assert keys("failing") == ["b"]
    assert keys("up") == ["a"]
    refused = schedctl("tasks", "ls", "--health", "sick")
    assert refused.returncode == 1 and "health" in refused.stderr


def test_validate_refuses_a_misspelt_field_offline(tmp_path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens: validate needs no service
    schedctl = runner(tmp_path, SCHEDULER_URL=nowhere)
    good = write(tmp_path / "good.yaml", [task("a", "0 3 * * *")])
    assert schedctl("validate", "-f", str(good)).returncode == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "n", "tasks": [{**task("a", "0 3 * * *"), "priorty": 1}]}))
    refused = schedctl("validate", "-f", str(bad))
    assert refused.returncode == 1
    assert "tasks[0]" in refused.stderr and "'priorty' was unexpected" in refused.stderr
    assert schedctl("plan", "-f", str(good)).returncode == 1  # the service is not there


def test_flags_beat_the_environment_which_beats_the_config_file(served, tmp_path) -> None:
    base, schedctl = served
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert schedctl("tasks", "ls").returncode == 0  # SCHEDULER_URL, the login's refresh token
    unreachable = schedctl("--url", nowhere, "tasks", "ls")
    assert unreachable.returncode == 1 and f"cannot reach {nowhere}" in unreachable.stderr
    stale = runner(tmp_path, SCHEDULER_URL=base, SCHEDULER_TOKEN="not-a-token")
    refused = stale("tasks", "ls")
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr
    assert stale("--token", access_token(base), "tasks", "ls").returncode == 0


def test_a_file_of_several_sets_plans_and_applies_each(served, tmp_path) -> None:
    _, schedctl = served
    path = tmp_path / "sets.json"
    sets = [
        {"name": "one", "tasks": [task("a", "0 1 * * *")]},
        {"name": "two", "tasks": [task("a", "0 2 * * *"), task("b", "0 3 * * *")]},
    ]
    path.write_text(json.dumps({"tasksets": sets}))
    [one, two] = json.loads(schedctl("plan", "-f", str(path), "--json").stdout)["tasksets"]
    assert (len(one["create"]), len(two["create"])) == (1, 2)
    assert schedctl("apply", "-f", str(path), "--yes").returncode == 0
    assert (live("one"), live("two")) == ({"a": "0 1 * * *"}, {"a": "0 2 * * *", "b": "0 3 * * *"})
    shown = json.loads(schedctl("tasksets", "get", "two", "--json").stdout)
    assert [m["key"] for m in shown["tasks"]] == ["a", "b"]
    planned = json.loads(schedctl("tasksets", "delete", "two", "--dry-run", "--json").stdout)
    assert sorted(d["key"] for d in planned["delete"]) == ["a", "b"]
    assert live("two") == {"a": "0 2 * * *", "b": "0 3 * * *"}
    assert schedctl("tasksets", "delete", "two", "--yes").returncode == 0
    assert live("two") == {}
    assert schedctl("tasksets", "get", "two").returncode == 1


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.mark.parametrize("columns", ["80", "120"])
def test_tables_show_whole_ids_that_paste_into_the_next_command(served, tmp_path, columns) -> None:
    base, _ = served
    schedctl = runner(tmp_path, SCHEDULER_URL=base, COLUMNS=columns)
    long = [
        {**task(f"k{i}", f"{i} 3 * * *"), "name": f"a rather long task name {i}"} for i in (1, 2)
    ]
    schedctl("apply", "-f", str(write(tmp_path / "s.yaml", long)), "--yes")
    tasks = list(Task.objects.order_by("taskset_key"))
    for mine in tasks:
        RunFactory(task=mine, owner=mine.owner, status="failed", finished_at=timezone.now())

    listed = schedctl("tasks", "ls")
    assert listed.returncode == 0, listed.stderr
    assert {str(t.pk) for t in tasks} <= set(re.findall(UUID, listed.stdout)), listed.stdout
    runs = schedctl("runs", "ls")
    assert runs.returncode == 0, runs.stderr
    run_ids = {str(pk) for pk in Run.objects.values_list("pk", flat=True)}
    assert run_ids <= set(re.findall(UUID, runs.stdout)), runs.stdout

    pasted = re.findall(UUID, listed.stdout)[0]
    assert schedctl("pause", pasted).returncode == 0
    assert Task.objects.get(pk=pasted).status == "paused"


def test_runs_ls_names_each_runs_task(served, tmp_path) -> None:
    _, schedctl = served
    entry = {**task("a", "0 3 * * *"), "name": "nightly-report"}
    schedctl("apply", "-f", str(write(tmp_path / "s.yaml", [entry])), "--yes")
    mine = Task.objects.get()
    RunFactory(task=mine, owner=mine.owner, status="failed", finished_at=timezone.now())
    shown = schedctl("runs", "ls")
    assert shown.returncode == 0, shown.stderr
    assert "nightly-report" in shown.stdout
    assert str(mine.pk) not in shown.stdout


def test_preview_and_tables_read_times_in_the_zone_given(served, tmp_path) -> None:
    _, schedctl = served
    shown = schedctl("preview", "0 9 * * *", "--tz", "America/New_York", "--count", "3")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.strip().splitlines()
    assert len(lines) == 3
    for line in lines:  # 09:00 there is 13:00 or 14:00 UTC, whichever DST says
        assert re.search(r" 09:00:00-0[45]:00 E[DS]T +\(\S+T1[34]:00:00Z\)$", line), line
    schedctl("apply", "-f", str(write(tmp_path / "s.yaml", [task("a", "0 3 * * *")])), "--yes")
    table = schedctl("tasks", "ls", "--tz", "Asia/Tokyo")
    assert table.returncode == 0, table.stderr
    assert re.search(r"12:00:00\+09:00", table.stdout), table.stdout  # 03:00 UTC in Tokyo
    refused = schedctl("tasks", "ls", "--tz", "Mars/Olympus")
    assert refused.returncode == 1 and "--tz" in refused.stderr


def test_plan_shows_an_rrules_rule_and_never_its_anchor(served, tmp_path) -> None:
    _, schedctl = served

    def rrule(rule: str) -> dict:
        return {**task("r", ""), "schedule": {"type": "rrule", "rule": rule}}

    path = write(tmp_path / "s.yaml", [rrule("FREQ=WEEKLY;BYDAY=MO")])
    created = schedctl("plan", "-f", str(path))
    assert "rrule FREQ=WEEKLY;BYDAY=MO" in created.stdout, created.stdout
    assert schedctl("apply", "-f", str(path), "--yes").returncode == 0
    write(path, [rrule("FREQ=WEEKLY;BYDAY=TU")])
    changed = schedctl("plan", "-f", str(path))
    assert changed.returncode == 0, changed.stderr
    assert "~ update r" in changed.stdout
    assert "schedule.rule:" in changed.stdout and "BYDAY=TU" in changed.stdout, changed.stdout
    assert "anchor" not in changed.stdout


def test_validate_refuses_the_cron_expressions_the_service_refuses(served, tmp_path) -> None:
    _, schedctl = served
    expressions = [
        "61 * * * *",
        "0 25 * * *",
        "0 0 31 2 *",
        "*/0 * * * *",
        "* * * * * *",
        "0 9 * * mon-fri",
        "@hourly",
        "0 0 L * *",
        "0 0 1-31/2 * *",
    ]
    for expression in expressions:
        path = write(tmp_path / "one.yaml", [task("a", expression)])
        offline = schedctl("validate", "-f", str(path))
        served_verdict = schedctl("plan", "-f", str(path))
        assert offline.returncode == served_verdict.returncode, (expression, offline.stderr)
        if offline.returncode:
            assert "tasks[0].schedule.expression:" in offline.stderr
    refused = schedctl("validate", "-f", str(write(tmp_path / "b.yaml", [task("a", "61 * * * *")])))
    assert refused.returncode == 1
    assert "tasks[0].schedule.expression: minute field: 61 is out of range 0-59" in refused.stderr
