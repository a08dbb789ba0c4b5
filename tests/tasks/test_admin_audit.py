"""The admin's changes are in the audit log like the API's (a task's change form with its diff, an
action on selected rows, an action on all rows matching a filter, an operator's delete); its
page lists the log read-only, a user's own objects' entries and their teams' only."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Membership, Team
from tasks.audit_log import AuditEntry
from tasks.models import ConcurrencyKey
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.tasks.test_admin_forms_members import page_values

pytestmark = pytest.mark.django_db
FROM = {"REMOTE_ADDR": "192.0.2.7", "HTTP_USER_AGENT": "Mozilla/5.0 audit-test"}


@pytest.fixture
def owner():
    return UserFactory(username="alice")


@pytest.fixture
def alice(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_a_change_form_is_recorded_with_its_diff_actor_and_address(alice, owner) -> None:
    task = TaskFactory(owner=owner, priority=5)
    url = reverse("admin:tasks_task_change", args=[task.pk])

    response = alice.post(url, {**page_values(alice, url), "priority": "9"}, **FROM)

    assert response.status_code == 302, response.content.decode()[-2000:]
    [update] = AuditEntry.objects.filter(action="update", object_id=str(task.pk))
    assert update.changes == {"priority": [5, 9]}
    assert (update.actor_name, update.owner_id) == ("alice", task.owner_id)
    assert (update.client_address, update.user_agent) == ("192.0.2.7", "Mozilla/5.0 audit-test")


def test_an_action_on_selected_rows_records_each_and_one_summary(alice, owner) -> None:
    tasks = [TaskFactory(owner=owner, status="active") for _ in range(2)]
    url = reverse("admin:tasks_task_changelist")

    alice.post(url, {"action": "pause", "_selected_action": [t.pk for t in tasks]}, **FROM)

    paused = AuditEntry.objects.filter(action="pause").values_list("object_id", flat=True)
    assert sorted(paused) == sorted(str(t.pk) for t in tasks)
    [summary] = AuditEntry.objects.filter(action="bulk_pause")
    assert sorted(summary.changes["filter"]["selected"]) == sorted(str(t.pk) for t in tasks)
    assert (summary.changes["count"], summary.changes["refused"]) == (2, 0)
    assert (summary.object_type, summary.actor_name, summary.user_agent) == (
        "task",
        "alice",
        "Mozilla/5.0 audit-test",
    )


def test_a_bulk_action_on_a_filter_records_the_filter_and_the_count(alice, owner) -> None:
    task = TaskFactory(owner=owner)
    failed = [RunFactory(task=task, status="failed", finished_at=timezone.now()) for _ in range(3)]
    url = reverse("admin:tasks_run_retry_matching") + f"?task__id__exact={task.pk}"

    alice.post(url, **FROM)

    retried = AuditEntry.objects.filter(action="retry").values_list("object_id", flat=True)
    assert sorted(retried) == sorted(str(r.pk) for r in failed)
    [summary] = AuditEntry.objects.filter(action="bulk_retry")
    assert summary.changes == {
        "filter": {"query": {"task__id__exact": str(task.pk)}, "applies_to": "failed runs"},
        "count": 3,
        "refused": 0,
    }
    assert (summary.object_type, summary.owner_id, summary.client_address) == (
        "run",
        owner.pk,
        "192.0.2.7",
    )


def test_an_operators_delete_is_recorded(client) -> None:
    operator = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(operator)
    task = TaskFactory(name="doomed")
    url = reverse("admin:tasks_task_delete", args=[task.pk])

    response = client.post(url, {"post": "yes"})

    assert response.status_code == 302
    [deleted] = AuditEntry.objects.filter(action="delete")
    assert (deleted.object_id, deleted.object_name, deleted.owner_id, deleted.actor_name) == (
        str(task.pk),
        "doomed",
        task.owner_id,
        "root",
    )


def test_an_operators_delete_of_a_teams_run_is_in_the_teams_log(client) -> None:
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    data = Team.objects.create(slug="data")
    viewer = UserFactory()
    Membership.objects.create(team=data, user=viewer, role="viewer")
    run = RunFactory(task=TaskFactory(team=data))

    assert (
        client.post(reverse("admin:tasks_run_delete", args=[run.pk]), {"post": "yes"}).status_code
        == 302
    )

    [deleted] = AuditEntry.objects.filter(action="delete")
    assert (deleted.object_type, deleted.object_id, deleted.team_id) == (
        "run",
        str(run.pk),
        data.pk,
    )
    member = Client()
    member.force_login(viewer)
    listed = member.get(reverse("admin:tasks_auditentry_changelist")).context["cl"].result_list
    assert list(listed) == [deleted]


def test_an_operators_delete_of_a_limit_key_names_its_kind(client) -> None:
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    key = ConcurrencyKey.objects.create(name="warehouse-db", max_running=2)
    url = reverse("admin:tasks_concurrencykey_delete", args=[key.pk])

    assert client.post(url, {"post": "yes"}).status_code == 302

    [deleted] = AuditEntry.objects.filter(action="delete")
    assert (deleted.object_type, deleted.object_name, deleted.owner_id) == (
        "concurrency_key",
        "warehouse-db",
        None,
    )


def test_the_log_page_is_read_only_and_scoped(alice, owner, client) -> None:
    mine = AuditEntry.objects.create(
        action="pause", object_type="task", object_id="m", object_name="mine", owner=owner
    )
    theirs = AuditEntry.objects.create(
        action="pause", object_type="task", object_id="t", object_name="theirs"
    )
    changelist = reverse("admin:tasks_auditentry_changelist")

    page = alice.get(changelist)
    assert page.status_code == 200
    assert list(page.context["cl"].result_list) == [mine]
    assert alice.get(reverse("admin:tasks_auditentry_change", args=[theirs.pk])).status_code == 404
    assert alice.get(reverse("admin:tasks_auditentry_add")).status_code == 403

    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    assert {e.pk for e in client.get(changelist).context["cl"].result_list} == {mine.pk, theirs.pk}
    detail = client.get(reverse("admin:tasks_auditentry_change", args=[mine.pk]))
    assert detail.status_code == 200 and b'name="_save"' not in detail.content
    deleting = client.post(
        reverse("admin:tasks_auditentry_delete", args=[mine.pk]), {"post": "yes"}
    )
    assert deleting.status_code == 403
    assert AuditEntry.objects.filter(pk=mine.pk).exists()


def test_the_log_page_shows_a_teams_entries_to_its_members_only(alice, owner, client) -> None:
    data, web = Team.objects.create(slug="data"), Team.objects.create(slug="web")
    Membership.objects.create(team=data, user=owner, role="viewer")
    ours = AuditEntry.objects.create(
        action="pause", object_type="task", object_id="d", object_name="ours", team=data
    )
    AuditEntry.objects.create(
        action="pause", object_type="task", object_id="w", object_name="webs", team=web
    )
    # The object's owner, but in another team: the team's members read it, not its owner.
    moved = AuditEntry.objects.create(
        action="pause", object_type="task", object_id="o", owner=owner, team=web
    )
    changelist = reverse("admin:tasks_auditentry_changelist")

    page = alice.get(changelist)
    assert list(page.context["cl"].result_list) == [ours]
    assert b">data<" in page.content  # the team column and its filter
    assert list(alice.get(changelist, {"team": "data"}).context["cl"].result_list) == [ours]
    assert list(alice.get(changelist, {"team": "web"}).context["cl"].result_list) == []
    assert alice.get(reverse("admin:tasks_auditentry_change", args=[moved.pk])).status_code == 404

    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    operator = client.get(changelist, {"team": "web"}).context["cl"].result_list
    assert {e.object_id for e in operator} == {"w", "o"}
