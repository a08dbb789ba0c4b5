"""The admin for every signed-in user: their own tasks, runs, channels and notifications
everywhere, another user's by URL a 404; operators see everyone's, with an owner filter."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Membership, Team
from notifications.models import Channel, Notification
from tasks.models import Task
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.tasks.test_admin_forms import form

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    mine = TaskFactory(owner=alice, name="alice nightly")
    theirs = TaskFactory(owner=bob, name="bob nightly")
    return alice, bob, mine, theirs


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_user_sees_only_their_own_tasks(people) -> None:
    alice, *_ = people
    page = signed_in(alice).get(reverse("admin:tasks_task_changelist")).content.decode()

    assert "alice nightly" in page
    assert "bob nightly" not in page
    assert "By owner" not in page, "no filter listing other users"


@pytest.mark.parametrize("view", ["change", "history", "delete"])
def test_another_users_task_by_url_is_a_404(people, view) -> None:
    alice, _, mine, theirs = people
    client = signed_in(alice)

    assert client.get(reverse(f"admin:tasks_task_{view}", args=[theirs.pk])).status_code == 404
    if view != "delete":  # deleting stays with operators
        assert client.get(reverse(f"admin:tasks_task_{view}", args=[mine.pk])).status_code == 200


def test_search_and_pasted_ids_find_nothing_of_others(people) -> None:
    alice, _, _, theirs = people
    client = signed_in(alice)
    url = reverse("admin:tasks_task_changelist")

    assert "bob nightly" not in client.get(url, {"q": "nightly"}).content.decode()
    assert "bob nightly" not in client.get(url, {"q": str(theirs.pk)}).content.decode()
    runs = reverse("admin:tasks_run_changelist")
    their_run = RunFactory(task=theirs)
    assert str(their_run.pk) not in client.get(runs, {"q": str(theirs.pk)}).content.decode()
    assert str(their_run.pk) not in client.get(runs, {"q": "bob"}).content.decode()


def test_runs_are_scoped_and_another_users_run_is_a_404(people) -> None:
    alice, _, mine, theirs = people
    my_run, their_run = RunFactory(task=mine), RunFactory(task=theirs)
    client = signed_in(alice)

    page = client.get(reverse("admin:tasks_run_changelist")).content.decode()
    assert str(my_run.pk) in page and str(their_run.pk) not in page
    assert client.get(reverse("admin:tasks_run_change", args=[their_run.pk])).status_code == 404
    mine_page = client.get(reverse("admin:tasks_run_change", args=[my_run.pk]))
    assert mine_page.status_code == 200
    assert "attempts-group" in mine_page.content.decode(), "the attempts inline shows"


def test_actions_reach_only_the_users_own_objects(people) -> None:
    alice, _, mine, theirs = people
    signed_in(alice).post(
        reverse("admin:tasks_task_changelist"),
        {"action": "pause", "_selected_action": [str(mine.pk), str(theirs.pk)]},
    )

    assert Task.objects.get(pk=mine.pk).status == "paused"
    assert Task.objects.get(pk=theirs.pk).status == "active"


def test_a_task_added_by_a_user_is_theirs_whatever_the_form_says(people) -> None:
    alice, bob, _, _ = people
    response = signed_in(alice).post(
        reverse("admin:tasks_task_add"), form(owner=bob.pk, name="added by alice")
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert Task.objects.get(name="added by alice").owner == alice


def test_channels_and_notifications_are_scoped(people) -> None:
    alice, bob, _, theirs = people
    my_channel = Channel.objects.create(owner=alice, kind="webhook", name="alice hook")
    their_channel = Channel.objects.create(owner=bob, kind="webhook", name="bob hook")
    their_run = RunFactory(task=theirs)
    notice = Notification.objects.create(
        channel=their_channel,
        run=their_run,
        task=theirs,
        attempt=1,
        event="failed",
        retry_until=timezone.now(),
    )
    client = signed_in(alice)

    channels = client.get(reverse("admin:notifications_channel_changelist")).content.decode()
    assert "alice hook" in channels and "bob hook" not in channels
    url = reverse("admin:notifications_channel_change", args=[their_channel.pk])
    assert client.get(url).status_code == 404
    url = reverse("admin:notifications_channel_change", args=[my_channel.pk])
    assert client.get(url).status_code == 200
    url = reverse("admin:notifications_notification_change", args=[notice.pk])
    assert client.get(url).status_code == 404
    assert signed_in(bob).get(url).status_code == 200


def test_operators_only_see_processes_users_and_the_whole_queues_dashboard(people) -> None:
    alice, *_ = people
    client = signed_in(alice)

    index = client.get(reverse("admin:index")).content.decode()
    assert "Tasks" in index and "Processes" not in index and "Users" not in index
    assert client.get(reverse("admin:tasks_process_changelist")).status_code == 403
    assert client.get(reverse("admin:auth_user_changelist")).status_code == 403
    # A user's dashboard is of their own runs: none of the whole queue's figures or processes.
    dashboard = client.get(reverse("admin-dashboard"))
    assert dashboard.status_code == 200 and dashboard.context["title"] == "Your dashboard"
    assert "processes alive" not in dashboard.content.decode()


def test_an_operator_sees_everyones_tasks_with_an_owner_filter(people) -> None:
    _, bob, _, theirs = people
    operator = signed_in(UserFactory(is_staff=True, is_superuser=True))

    page = operator.get(reverse("admin:tasks_task_changelist")).content.decode()
    assert "alice nightly" in page and "bob nightly" in page
    assert "By owner" in page
    filtered = operator.get(reverse("admin:tasks_task_changelist"), {"owner": bob.pk})
    assert "alice nightly" not in filtered.content.decode()
    assert operator.get(reverse("admin:tasks_task_change", args=[theirs.pk])).status_code == 200
    runs = operator.get(reverse("admin:tasks_run_changelist")).content.decode()
    assert "By owner" in runs


def test_an_inactive_user_is_not_let_in(people) -> None:
    alice, *_ = people
    alice.is_active = False
    alice.save()
    client = Client()
    client.force_login(alice)

    response = client.get(reverse("admin:tasks_task_changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_local_user_without_staff_signs_in_with_a_password(people) -> None:
    client = Client()
    response = client.post(
        reverse("admin:login"), {"username": "alice", "password": "password-123", "next": "/admin/"}
    )

    assert response.status_code == 302
    assert client.get(reverse("admin:tasks_task_changelist")).status_code == 200


def test_a_teams_tasks_are_its_members_and_its_viewers_only_read_them() -> None:
    team = Team.objects.create(slug="data")
    editor, viewer, outsider = UserFactory(), UserFactory(), UserFactory()
    Membership.objects.create(team=team, user=editor, role="editor")
    Membership.objects.create(team=team, user=viewer, role="viewer")
    task = TaskFactory(owner=UserFactory(), team=team, name="team nightly")
    listed = reverse("admin:tasks_task_changelist")
    page = reverse("admin:tasks_task_change", args=[task.pk])

    assert "team nightly" in signed_in(viewer).get(listed).content.decode()
    assert "team nightly" not in signed_in(outsider).get(listed).content.decode()
    assert signed_in(outsider).get(page).status_code == 404
    # The viewer reads the page, and saving it or an action leaves the task alone.
    assert signed_in(viewer).get(page).status_code == 200
    assert signed_in(viewer).post(page, form(name="renamed")).status_code == 403
    assert Task.objects.get(pk=task.pk).name == "team nightly"
    pause = {"action": "pause", "_selected_action": [str(task.pk)]}
    signed_in(viewer).post(listed, pause)
    assert Task.objects.get(pk=task.pk).status == "active"
    signed_in(editor).post(listed, pause)
    assert Task.objects.get(pk=task.pk).status == "paused"
