"""The audit log is append-only in the database itself: its trigger refuses an UPDATE and a
DELETE of an entry, whatever sends them, but retention's delete of entries past the retention
the transaction declares; a change rolled back leaves no entry; pruning takes only old ones."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Team
from notifications.models import Channel
from reviewers import retention
from reviewers.checks import check_retention
from reviewers.management.commands.runreviewer import Command
from tasks import audit
from tasks.audit_log import AuditEntry
from tasks.db import db_now
from tasks.transitions import lifecycle
from tests.conftest import client_for
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)


def entry(*, days_ago: float = 0, action: str = "pause") -> AuditEntry:
    at = timezone.now() - days_ago * DAY
    return AuditEntry.objects.create(at=at, action=action, object_type="task", object_id="x")


def refused(statement: str, params: list | None = None, *, retention_days: str = "") -> bool:
    """Whether the database refuses `statement` (run in a savepoint, rolled back either way)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if retention_days:
                cursor.execute(
                    "SELECT set_config('scheduler.audit_retention_days', %s, true)",
                    [retention_days],
                )
            cursor.execute(statement, params)
            transaction.set_rollback(True)
    except DatabaseError as exc:
        assert "append-only" in str(exc)
        return True
    return False


def test_an_update_of_an_entry_is_refused() -> None:
    one = entry(days_ago=500)
    assert refused("UPDATE tasks_auditentry SET action = 'create' WHERE id = %s", [one.pk])
    # Declaring a retention allows no update either.
    assert refused(
        "UPDATE tasks_auditentry SET changes = '{}' WHERE id = %s", [one.pk], retention_days="1"
    )
    one.refresh_from_db()
    assert one.action == "pause"


def test_a_delete_is_refused_but_retentions_of_entries_past_it() -> None:
    young, old = entry(days_ago=10), entry(days_ago=400)
    delete = "DELETE FROM tasks_auditentry WHERE id = %s"

    assert refused(delete, [old.pk])  # no retention declared
    assert refused(delete, [old.pk], retention_days="0")  # a retention under a day
    assert refused(delete, [young.pk], retention_days="365")  # not past it
    assert refused("DELETE FROM tasks_auditentry", retention_days="365")  # one row too young
    assert not refused(delete, [old.pk], retention_days="365")
    assert AuditEntry.objects.filter(pk__in=[young.pk, old.pk]).count() == 2  # rolled back
    with pytest.raises(DatabaseError):  # the ORM's delete is no way around it
        with transaction.atomic():
            AuditEntry.objects.filter(pk=young.pk).delete()


def test_a_rolled_back_change_leaves_no_entry() -> None:
    task = TaskFactory(status="active")
    with pytest.raises(RuntimeError), transaction.atomic():
        lifecycle.pause_task(task=task, now=db_now())
        assert AuditEntry.objects.filter(action="pause").count() == 1
        raise RuntimeError("the caller's transaction fails after the pause")
    assert not AuditEntry.objects.filter(action="pause").exists()

    lifecycle.pause_task(task=task, now=db_now())
    [paused] = AuditEntry.objects.filter(action="pause")
    assert (paused.object_id, paused.owner_id, paused.actor_id) == (
        str(task.pk),
        task.owner_id,
        None,
    )


def test_a_change_made_with_a_service_token_names_its_account_and_token() -> None:
    lead = client_for(UserFactory(username="lead"))
    assert lead.post("/api/v1/teams", {"slug": "data"}, format="json").status_code == 201
    accounts = "/api/v1/teams/data/service-accounts"
    made = lead.post(accounts, {"name": "ci", "role": "editor"}, format="json")
    assert made.status_code == 201, made.content
    answer = lead.post(
        f"{accounts}/ci/tokens", {"name": "pipeline", "scopes": ["write"]}, format="json"
    )
    assert answer.status_code == 201, answer.content
    machine = APIClient()
    machine.credentials(HTTP_AUTHORIZATION=f"Bearer {answer.json()['token']}")
    body = {"name": "load", "kind": "handler", "payload": {"name": "noop"}}
    created = machine.post("/api/v1/tasks", body, format="json", HTTP_USER_AGENT="pipeline/1")
    assert created.status_code == 201, created.content
    [entry] = AuditEntry.objects.filter(action="create", object_id=created.json()["id"])
    assert (entry.service_account, entry.token_id) == ("data/ci", str(answer.json()["id"]))
    assert entry.user_agent == "pipeline/1"


def test_pruning_takes_only_entries_past_the_retention_in_batches() -> None:
    old = [entry(days_ago=400 + n) for n in range(3)]
    young = entry(days_ago=300)

    assert retention.prune_audit_entries(older_than_days=365, batch=2) == 2
    assert retention.prune_audit_entries(older_than_days=365, batch=2) == 1
    assert retention.prune_audit_entries(older_than_days=365, batch=2) == 0
    assert list(AuditEntry.objects.values_list("pk", flat=True)) == [young.pk]
    assert retention.prune_audit_entries(older_than_days=0, batch=10) == 0  # 0 keeps forever
    assert all(not AuditEntry.objects.filter(pk=e.pk).exists() for e in old)


@override_settings(REVIEWERS_AUDIT_RETENTION_DAYS=30)
def test_the_reviewers_pass_prunes_the_log() -> None:
    old, young = entry(days_ago=31), entry(days_ago=29)
    assert Command().prune() is False  # nothing more waiting
    assert list(AuditEntry.objects.values_list("pk", flat=True)) == [young.pk]
    assert not AuditEntry.objects.filter(pk=old.pk).exists()


def test_an_action_or_object_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="vocabulary"):
        audit.Entry(action="explode", object_type="task", object_id="x")
    with pytest.raises(ValueError, match="vocabulary"):
        audit.Entry(action="pause", object_type="spaceship", object_id="x")


def test_a_negative_retention_is_refused_at_startup(settings) -> None:
    settings.REVIEWERS_AUDIT_RETENTION_DAYS = -1
    assert [e.id for e in check_retention(None)] == ["reviewers.E003"]
    settings.REVIEWERS_AUDIT_RETENTION_DAYS = 0  # keep forever
    assert check_retention(None) == []


def test_the_migrations_fill_the_team_of_existing_entries_and_keep_the_trigger() -> None:
    owner, team = UserFactory(), Team.objects.create(slug="data")
    shared, personal = TaskFactory(owner=owner, team=team), TaskFactory(owner=owner)
    run = RunFactory(task=shared)
    channel = Channel.objects.create(
        owner=owner, team=team, kind="webhook", config={"url": "https://example.com/h"}
    )
    rows = {
        "task": AuditEntry.objects.create(action="pause", object_type="task", object_id=shared.pk),
        "run": AuditEntry.objects.create(action="retry", object_type="run", object_id=run.pk),
        "channel": AuditEntry.objects.create(
            action="create", object_type="channel", object_id=channel.pk
        ),
        "personal": AuditEntry.objects.create(
            action="pause", object_type="task", object_id=personal.pk
        ),
        "gone": AuditEntry.objects.create(action="delete", object_type="task", object_id="x"),
        "bulk": AuditEntry.objects.create(action="bulk_pause", object_type="task"),
    }
    with connection.cursor() as cursor:
        for app, name in (
            ("tasks", "0036_audit_entry_team"),
            ("notifications", "0008_audit_entry_team"),
        ):
            cursor.execute(importlib.import_module(f"{app}.migrations.{name}").FILL_TEAMS)

    teams = {name: AuditEntry.objects.get(pk=row.pk).team_id for name, row in rows.items()}
    assert teams == {
        "task": team.pk,
        "run": team.pk,
        "channel": team.pk,
        "personal": None,
        "gone": None,
        "bulk": None,
    }
    pk = rows["personal"].pk
    assert refused("UPDATE tasks_auditentry SET team_id = %s WHERE id = %s", [team.pk, pk])
