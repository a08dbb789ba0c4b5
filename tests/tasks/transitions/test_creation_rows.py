"""creation.create_task_rows: the batch create writes tasks, runs, health rows and audit entries
from rows of values, never model instances; what it writes is what a single create writes for
the same body, and create_tasks hands back instances holding the rows inserted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accounts.models import Team
from tasks import schedules
from tasks.audit_log import AuditEntry
from tasks.models import Run, Task, TaskHealth
from tasks.transitions import creation
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 5, 12, 0, 0, 250000, tzinfo=UTC)


def _item(team: Team, **schedule: object) -> dict:
    """A validated body with every field the batch takes away from its default."""
    return {
        "name": "nightly export",
        "kind": Task.Kind.HTTP,
        "payload": {"url": "https://example.com/hook", "method": "POST", "body": {"a": [1, 2.5]}},
        "schedule": schedules.normalize(schedule or None, now=NOW),
        "priority": 8,
        "max_attempts": 7,
        "retry_backoff_base": 1.5,
        "retry_backoff_cap": 600.25,
        "timeout": 12.75,
        "notify": [],
        "resources": {"cpu": "250m", "memory": "64Mi"},
        "on_zombie": Task.OnZombie.CANCEL,
        "expect": {"start_within": 60.0},
        "team": team,
        "concurrency": {"key": "exports", "limit": 2, "scope": "owner"},
        "rate_limit": {"key": "crm", "limit": 10, "per": 60, "scope": "owner"},
    }


def _row(model, **lookup) -> dict:
    row = model.objects.filter(**lookup).values().get()
    skip = {"id", "task_id", "created_at", "updated_at", "summary", "object_id", "at"}
    return {k: v for k, v in row.items() if k not in skip}


@pytest.mark.parametrize(
    "schedule",
    [
        {},
        {"type": "interval", "every": 60, "jitter": 5},
        {"type": "once", "run_at": "2026-12-05T11:00:00Z"},
    ],
)
def test_a_batch_writes_what_a_single_create_writes(schedule, settings) -> None:
    settings.TASKS_LOOKAHEAD_SECONDS = 300  # the interval's first occurrences planned inline
    owner = UserFactory()
    team = Team.objects.create(slug="data")
    single, created = creation.create_task(owner=owner, data=_item(team, **schedule), now=NOW)
    assert created
    (batch_id,) = creation.create_task_rows(
        owner=owner, items=[_item(team, **schedule)], now=NOW
    ).ids
    assert _row(Task, pk=batch_id) == _row(Task, pk=single.pk)
    assert _row(Task, pk=batch_id)["cpu_millis"] == 250
    assert _row(Task, pk=batch_id)["concurrency_key_id"] is not None
    runs = [
        list(Run.objects.filter(task_id=pk).order_by("scheduled_at"))
        for pk in (single.pk, batch_id)
    ]
    assert len(runs[0]) == len(runs[1]) >= 1
    for ours, theirs in zip(runs[1], runs[0], strict=True):
        rows = [_row(Run, pk=ours.pk), _row(Run, pk=theirs.pk)]
        if schedule.get("jitter"):  # seeded by the task's id: each its own, within the bound
            for row in rows:
                offset = row.pop("execute_at") - row["scheduled_at"]
                assert timedelta(0) <= offset <= timedelta(seconds=5)
                assert row.pop("missed_after") - row["scheduled_at"] - offset > timedelta(0)
        assert rows[0] == rows[1]
    assert _row(TaskHealth, task_id=batch_id) == _row(TaskHealth, task_id=single.pk)
    entries = [_row(AuditEntry, object_id=str(pk)) for pk in (single.pk, batch_id)]
    assert entries[1] == entries[0]
    assert entries[1]["team_id"] == team.pk and entries[1]["object_name"] == "nightly export"


def test_an_unnamed_task_is_named_by_its_id_in_the_audit_log() -> None:
    owner: Any = UserFactory()
    item = {"kind": Task.Kind.HANDLER, "payload": {"name": "noop"}, "schedule": {"type": "once"}}
    item["schedule"] = schedules.normalize(None, now=NOW)
    (task_id,) = creation.create_task_rows(owner=owner, items=[item], now=NOW).ids
    entry = AuditEntry.objects.get(object_id=str(task_id))
    assert (entry.object_name, entry.owner_id, entry.team_id) == (str(task_id), owner.pk, None)


def test_create_tasks_hands_back_the_rows_inserted_as_saved_instances() -> None:
    owner = UserFactory()
    team = Team.objects.create(slug="data")
    existing, _ = creation.create_task(
        owner=owner, data={**_item(team), "dedup_key": "old"}, now=NOW
    )
    items = [
        {**_item(team), "dedup_key": "new"},
        {**_item(team), "dedup_key": "new"},
        {**_item(team), "dedup_key": "old"},
    ]
    tasks = creation.create_tasks(owner=owner, items=items, now=NOW)
    assert tasks[0] is tasks[1] and tasks[2].pk == existing.pk
    new = tasks[0]
    assert not new._state.adding and new.team is team and new.owner is owner
    stored = Task.objects.get(pk=new.pk)
    for field in Task._meta.concrete_fields:
        if field.name != "executable":
            assert getattr(new, field.attname) == getattr(stored, field.attname), field.name
    assert new.created_at > datetime.now(UTC) - timedelta(minutes=1)
    assert Run.objects.filter(task=new).count() == 1
