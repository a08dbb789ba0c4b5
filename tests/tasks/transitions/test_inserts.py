"""tasks/transitions/inserts.py: rows inserted by the named statements of sql/inserts.sql are the
rows the ORM's bulk_create writes, and every column of the tables is a field of their models."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from accounts.models import Team
from tasks import instances
from tasks.models import ConcurrencyKey, Run, Task
from tasks.transitions import inserts
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 29, 1, 30, 15, 123456, tzinfo=UTC)  # microseconds kept


@pytest.mark.parametrize("model", [Task, Run])
def test_every_column_of_the_table_is_a_field_of_the_model(model) -> None:
    """A column the model does not know would be NULL in every inserted row (its default not
    applied): the statement reads rows as the table's row type."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
            [model._meta.db_table],
        )
        table = {name for (name,) in cursor.fetchall()}
    assert table == {field.column for field in model._meta.concrete_fields}


def _task(owner, team, key) -> Task:
    """A task with every field away from its default."""
    return Task(
        owner=owner,
        team=team,
        name="nightly export",
        dedup_key=None,
        kind=Task.Kind.HTTP,
        payload={"url": "https://example.com/hook", "method": "POST", "body": {"a": [1, 2.5]}},
        executable_name="export.sh",
        schedule={"type": "cron", "cron": "30 1 * * *", "timezone": "Europe/Berlin"},
        schedule_type="cron",
        priority=8,
        status=Task.Status.PAUSED,
        max_attempts=7,
        retry_backoff_base=1.5,
        retry_backoff_cap=600.25,
        timeout=12.75,
        notify=[{"channel": 3, "on": ["failure"]}],
        resources={"cpu": "250m", "memory": "64Mi"},
        expect={"every": 3600},
        cpu_millis=250,
        memory_bytes=64 * 2**20,
        concurrency={"key": "exports", "limit": 2},
        concurrency_key=key,
        rate_limit={},
        on_zombie=Task.OnZombie.CANCEL,
        next_unplanned_at=AT,
        runs_planned=4,
        paused_at=AT - timedelta(hours=1),
        resumed_at=None,
        taskset_key="export",
        taskset_entry={"applied": {"name": "nightly export"}},
    )


def _columns(model, pk) -> dict:
    """The row's columns but its id and the times of its save (auto_now_add, auto_now), which
    are asserted apart."""
    row = model.objects.filter(pk=pk).values().get()
    return {k: v for k, v in row.items() if k not in ("id", "created_at", "updated_at")}


def _saved_at(model, pk) -> list[datetime]:
    row = model.objects.filter(pk=pk).values().get()
    return [row[name] for name in ("created_at", "updated_at") if name in row]


def test_a_task_and_its_run_are_written_as_bulk_create_writes_them() -> None:
    owner = UserFactory()
    team = Team.objects.create(slug="data")
    key = ConcurrencyKey.objects.create(owner=owner, name="exports", max_running=2)
    ours, theirs = _task(owner, team, key), _task(owner, team, key)
    inserts.insert([ours])
    Task.objects.bulk_create([theirs])
    assert not ours._state.adding
    before = datetime.now(UTC) - timedelta(minutes=1)
    assert all(at > before for at in _saved_at(Task, ours.pk)), _saved_at(Task, ours.pk)
    assert _columns(Task, ours.pk) == _columns(Task, theirs.pk)
    assert _columns(Task, ours.pk)["next_unplanned_at"] == AT
    runs = []
    for task in (ours, theirs):
        runs.append(
            Run(
                task=task,
                owner_id=owner.pk,
                scheduled_at=AT,
                execute_at=AT + timedelta(microseconds=7),
                missed_after=AT + timedelta(seconds=30),
                priority=8,
                max_attempts=7,
                cpu_millis=250,
                memory_bytes=64 * 2**20,
                concurrency_key_id=key.pk,
                status=Run.Status.SKIPPED,
                finished_at=AT,
                skip_kind="misfire",
                error="missed by 3 s",
                backfill=True,
            )
        )
    inserts.insert(runs[:1])
    Run.objects.bulk_create(runs[1:])
    ours_run, theirs_run = _columns(Run, runs[0].pk), _columns(Run, runs[1].pk)
    assert ours_run.pop("task_id") == ours.pk
    assert theirs_run.pop("task_id") == theirs.pk
    # The summary the table's trigger writes (sql/run_summary.sql) names the run itself.
    assert str(runs[0].pk) in ours_run.pop("summary")
    assert str(runs[1].pk) in theirs_run.pop("summary")
    assert ours_run == theirs_run
    assert _saved_at(Run, runs[0].pk)[0] > before


def _stdlib_rows(objs) -> list:
    """The rows as the standard library's encoder writes them, read back."""
    text = json.dumps(
        [
            {
                field.column: field.get_prep_value(field.pre_save(obj, True))
                if inserts._computed_when_saved(field)
                else getattr(obj, field.attname)
                for field in type(obj)._meta.concrete_fields
            }
            for obj in objs
        ],
        default=inserts._json_value,
        allow_nan=False,
    )
    return json.loads(text)


def _without_saved_at(rows: list) -> list:
    return [{k: v for k, v in row.items() if k not in ("created_at", "updated_at")} for row in rows]


def test_rows_are_the_text_the_standard_library_writes() -> None:
    """orjson writes the rows; a datetime whose offset has seconds (Amsterdam's mean time,
    +00:19:32) would be rounded to the minute by it, so such a column is written by isoformat."""
    owner = UserFactory()
    task = _task(owner, None, None)
    task.next_unplanned_at = datetime(1850, 1, 1, tzinfo=ZoneInfo("Europe/Amsterdam"))
    task.paused_at = AT.astimezone(ZoneInfo("Asia/Kolkata"))
    ours = json.loads(inserts.rows_json([task]))
    assert ours[0]["next_unplanned_at"] == "1850-01-01T00:00:00+00:19:32"
    assert _without_saved_at(ours) == _without_saved_at(_stdlib_rows([task]))


def test_rows_orjson_refuses_are_written_by_the_standard_library() -> None:
    """An integer wider than 64 bits (PostgreSQL's jsonb stores it) in a payload."""
    task = _task(UserFactory(), None, None)
    task.payload = {"url": "https://example.com/hook", "body": {"n": 2**70}}
    ours = json.loads(inserts.rows_json([task]))
    assert ours[0]["payload"]["body"]["n"] == 2**70
    assert _without_saved_at(ours) == _without_saved_at(_stdlib_rows([task]))
    inserts.insert([task])
    assert Task.objects.get(pk=task.pk).payload["body"]["n"] == 2**70


def test_rows_of_values_are_written_as_bulk_create_writes_their_instances() -> None:
    """`insert_values` (the batch create's rows) against bulk_create of an instance built from
    the same values; a datetime not in UTC is written by isoformat and left to the caller."""
    owner: Any = UserFactory()
    given = {
        name: getattr(_task(owner, None, None), name)
        for name in ("owner_id", "name", "kind", "payload", "schedule", "priority", "timeout")
    }
    given["paused_at"] = AT.astimezone(ZoneInfo("Asia/Kolkata"))
    row = instances.values(Task, given)
    theirs = instances.build(Task, given)
    inserts.insert_values(Task, [row])
    Task.objects.bulk_create([theirs])
    assert _columns(Task, row["id"]) == _columns(Task, theirs.pk)
    assert row["paused_at"] == given["paused_at"] and isinstance(row["paused_at"], datetime)
    before = datetime.now(UTC) - timedelta(minutes=1)
    assert all(at > before for at in _saved_at(Task, row["id"]))
    assert row["created_at"] == _saved_at(Task, row["id"])[0]
    run_given = {"task_id": row["id"], "owner_id": owner.pk, "scheduled_at": AT, "execute_at": AT}
    run_row = instances.values(Run, run_given)
    run = instances.build(Run, {**run_given, "task_id": theirs.pk})
    inserts.insert_values(Run, [run_row])
    Run.objects.bulk_create([run])
    ours, theirs_run = _columns(Run, run_row["id"]), _columns(Run, run.pk)
    assert (ours.pop("summary") is None) == (theirs_run.pop("summary") is None)
    assert (ours.pop("task_id"), theirs_run.pop("task_id")) == (row["id"], theirs.pk)
    assert ours == theirs_run
