"""The admin's task form: add and change tasks with the API's own rules and services."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tasks.models import Run, Task
from tests.factories import TaskFactory, UserFactory
from tests.tasks.support import running_run


@pytest.fixture
def admin_user(db):
    return UserFactory(username="operator", is_staff=True, is_superuser=True)


@pytest.fixture
def staff(client, admin_user):
    client.force_login(admin_user)
    return client


def form(**fields: object) -> dict:
    body = {
        "name": "nightly",
        "kind": "handler",
        "payload": '{"name": "echo", "args": {"n": 1}}',
        "schedule_type": "cron",
        "expression": "0 9 * * *",
        "timezone": "Europe/Berlin",
        "misfire": "run_once",
        "overlap": "allow",
        "priority": "5",
        "max_attempts": "3",
        "backoff_base": "2",
        "backoff_cap": "600",
        "notify": "[]",
        "runs-TOTAL_FORMS": "0",
        "runs-INITIAL_FORMS": "0",
    }
    body.update({k: str(v) for k, v in fields.items()})
    return body


def test_add_a_cron_task_through_the_services(staff, admin_user) -> None:
    body = form(owner=admin_user.pk, resources='{"cpu": "500m", "memory": "256Mi"}')
    response = staff.post(reverse("admin:tasks_task_add"), body)

    assert response.status_code == 302, response.content.decode()[-3000:]
    task = Task.objects.get()
    assert task.owner == admin_user
    assert task.schedule["type"] == "cron" and task.schedule["timezone"] == "Europe/Berlin"
    assert task.schedule["anchor"] is not None, "normalised by the API's rules"
    assert (task.max_attempts, task.payload["args"]) == (3, {"n": 1})
    assert task.resources == {"cpu": "500m", "memory": "256Mi"}
    assert (task.cpu_millis, task.memory_bytes) == (500, 256 * 2**20)
    assert task.on_zombie == "notify", "the default when the form says nothing"
    assert task.next_unplanned_at is not None and task.next_unplanned_at.astimezone().second == 0

    page = staff.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    fire_times = re.findall(r"<li>(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC) \(", page)
    assert len(fire_times) == 5
    assert page.count("Europe/Berlin)</li>") == 5


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"expression": "61 * * * *"}, "expression", ""),
        ({"timezone": "Mars/Olympus"}, "timezone", "valid choice"),
        ({"priority": "12"}, "priority", ""),
        ({"payload": '{"args": {}}'}, "payload", ""),
        ({"schedule_type": "interval", "every": ""}, "every", "required"),
        ({"backoff_base": "900"}, "backoff_cap", "at least base"),
        ({"resources": '{"cpu": "lots"}'}, "resources", ""),
        (
            {"schedule_type": "rrule", "rule": "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=0"},
            "rule",
            "BYSETPOS: ",
        ),
    ],
)
def test_bad_fields_are_named_like_the_api_names_them(
    staff, admin_user, fields: dict, field: str, message: str
) -> None:
    response = staff.post(reverse("admin:tasks_task_add"), form(owner=admin_user.pk, **fields))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert message in " ".join(errors[field])
    assert not Task.objects.exists()


def test_change_replans_and_keeps_the_schedule_when_it_is_not_touched(staff, admin_user) -> None:
    staff.post(reverse("admin:tasks_task_add"), form(owner=admin_user.pk))
    task = Task.objects.get()
    url = reverse("admin:tasks_task_change", args=[task.pk])

    renamed = staff.post(url, form(owner=admin_user.pk, name="renamed"))
    assert renamed.status_code == 302
    task.refresh_from_db()
    assert task.name == "renamed" and task.schedule["expression"] == "0 9 * * *"

    staff.post(url, form(owner=admin_user.pk, schedule_type="interval", every=3600))
    task.refresh_from_db()
    assert task.schedule["type"] == "interval" and task.schedule["every"] == 3600
    assert task.schedule["timezone"] == "Europe/Berlin"


def test_a_refused_change_is_shown_and_nothing_is_saved(staff, admin_user) -> None:
    task = TaskFactory(owner=admin_user, name="one-time")
    running_run(task)
    url = reverse("admin:tasks_task_change", args=[task.pk])

    response = staff.post(
        url, form(owner=admin_user.pk, name="x", schedule_type="once"), follow=True
    )

    assert "Not saved" in response.content.decode()
    task.refresh_from_db()
    assert task.name == "one-time"


def test_skip_next_action(staff, admin_user) -> None:
    staff.post(reverse("admin:tasks_task_add"), form(owner=admin_user.pk))
    task = Task.objects.get()

    staff.post(
        reverse("admin:tasks_task_changelist"),
        {"action": "skip_next", "_selected_action": [task.pk]},
    )

    assert Run.objects.get(task=task).status == "skipped"


def test_lists_show_seconds_and_processes_is_spelled_right(staff, admin_user) -> None:
    staff.post(reverse("admin:tasks_task_add"), form(owner=admin_user.pk))

    tasks_page = staff.get(reverse("admin:tasks_task_changelist")).content.decode()
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", tasks_page)
    index = staff.get(reverse("admin:index")).content.decode()
    assert "Processes" in index and "Processs" not in index


def test_the_task_page_shows_and_changes_resources_and_on_zombie(staff, admin_user) -> None:
    task = TaskFactory(owner=admin_user, resources={"cpu": "2"}, on_zombie="notify")
    page = staff.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    assert "&quot;cpu&quot;: &quot;2&quot;" in page and 'name="on_zombie"' in page
    body = form(owner=admin_user.pk, resources='{"cpu": "4"}', on_zombie="cancel")
    response = staff.post(reverse("admin:tasks_task_change", args=[task.pk]), body)
    assert response.status_code == 302, response.content.decode()[-3000:]
    task.refresh_from_db()
    assert (task.resources, task.cpu_millis, task.on_zombie) == ({"cpu": "4"}, 4000, "cancel")


def test_add_an_rrule_task(staff, admin_user) -> None:
    rule = "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1;BYHOUR=17"
    body = form(owner=admin_user.pk, schedule_type="rrule", rule=rule, expression="")
    response = staff.post(reverse("admin:tasks_task_add"), body)

    assert response.status_code == 302, response.content.decode()[-3000:]
    schedule = Task.objects.get().schedule
    assert (schedule["type"], schedule["rule"]) == (
        "rrule",
        "FREQ=MONTHLY;BYDAY=FR;BYHOUR=17;BYSETPOS=-1",
    )
