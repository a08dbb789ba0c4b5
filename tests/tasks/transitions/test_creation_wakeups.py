"""Creating tasks wakes the schedulers only when they have something to plan soon."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tasks.db import RUN_DUE_CHANNEL, TASK_CHANGED_CHANNEL, connect
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener(transactional_db) -> Iterator[psycopg.Connection]:
    conn = connect("test-listen")
    conn.execute(f"LISTEN {TASK_CHANGED_CHANNEL}")
    conn.execute(f"LISTEN {RUN_DUE_CHANNEL}")
    yield conn
    conn.close()


def channels_heard(conn: psycopg.Connection) -> set[str]:
    return {note.channel for note in conn.notifies(timeout=0.5)}


def once(**extra: object) -> dict:
    return {"kind": "handler", "payload": {"name": "noop"}, "schedule": {"type": "once", **extra}}


def test_batch_of_one_time_tasks_due_now_wakes_workers_not_schedulers(listener):
    api = client_for(UserFactory())
    response = api.post("/api/v1/tasks/batch", {"tasks": [once(), once()]}, format="json")
    assert response.status_code == 201, response.content
    assert channels_heard(listener) == {RUN_DUE_CHANNEL}


def test_single_one_time_create_does_not_wake_schedulers(listener):
    api = client_for(UserFactory())
    response = api.post("/api/v1/tasks", once(), format="json")
    assert response.status_code == 201, response.content
    assert channels_heard(listener) == {RUN_DUE_CHANNEL}


def test_batch_with_an_occurrence_to_plan_soon_wakes_schedulers(listener, settings):
    # Every second with a 1 s look-ahead: the next occurrence after those planned inline is for
    # a scheduler to plan before its next heartbeat (2 s).
    settings.TASKS_LOOKAHEAD_SECONDS = 1.0
    settings.TASKS_HEARTBEAT_SECONDS = 2.0
    every = {"kind": "handler", "payload": {"name": "noop"}}
    every["schedule"] = {"type": "interval", "every": 1, "allow_every_second": True}
    api = client_for(UserFactory())
    response = api.post("/api/v1/tasks/batch", {"tasks": [once(), every]}, format="json")
    assert response.status_code == 201, response.content
    assert TASK_CHANGED_CHANNEL in channels_heard(listener)


def test_batch_with_occurrences_past_the_next_heartbeat_does_not_wake_schedulers(
    listener, settings
):
    # Every second with a 30 s look-ahead: everything up to 30 s ahead is planned inline, and a
    # scheduler's regular pass (every heartbeat at most) plans the rest in time.
    settings.TASKS_LOOKAHEAD_SECONDS = 30.0
    settings.TASKS_HEARTBEAT_SECONDS = 2.0
    every = {"kind": "handler", "payload": {"name": "noop"}}
    every["schedule"] = {"type": "interval", "every": 1, "allow_every_second": True}
    later = once(run_at="2099-01-01T00:00:00Z")
    api = client_for(UserFactory())
    response = api.post("/api/v1/tasks/batch", {"tasks": [every, later]}, format="json")
    assert response.status_code == 201, response.content
    assert TASK_CHANGED_CHANNEL not in channels_heard(listener)
