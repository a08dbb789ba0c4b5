"""The task counts kept by the database (tasks/sql/task_counts.sql) are exact: after creates one
at a time and in a batch, deletes, moves to and from a team, membership changes, and two
transactions creating tasks of one owner at once, the default task list's `count` (which reads
them, tasks/sql/api_json.sql `visible_count_of_list`) equals `count(*)` of the tasks the caller
sees, and every key's kept count equals its tasks counted."""

from __future__ import annotations

import importlib

import psycopg
import pytest
from django.db import connection

from accounts import access
from accounts.models import Membership, Team
from tasks.models import Task
from tests.conftest import client_for, database_url
from tests.factories import TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

KEPT = "SELECT team_id, owner_id, sum(value) FROM tasks_taskcount GROUP BY 1, 2"
COUNTED = """
SELECT team_id, CASE WHEN team_id IS NULL THEN owner_id END, count(*) FROM tasks_task GROUP BY 1, 2
"""


def once(**extra: object) -> dict:
    return {"kind": "handler", "payload": {"name": "noop"}, "schedule": {"type": "once"}, **extra}


def _listed(user) -> int:
    """The default list's `count`, as the API states it."""
    response = client_for(user).get("/api/v1/tasks", {"page_size": 5})
    assert response.status_code == 200, response.content
    return response.json()["count"]


def assert_exact(*users) -> None:
    with connection.cursor() as cursor:
        cursor.execute(KEPT)
        kept = {(team, owner): value for team, owner, value in cursor.fetchall() if value}
        cursor.execute(COUNTED)
        counted = {(team, owner): value for team, owner, value in cursor.fetchall()}
    assert kept == counted
    for user in users:
        assert _listed(user) == access.visible(Task.objects.all(), user).count()


@pytest.fixture
def made():
    """A member of team `data` (an editor, who may create its tasks) and a user in no team."""
    data = Team.objects.create(slug="data")
    me, solo = UserFactory(), UserFactory()
    Membership.objects.create(team=data, user=me, role="editor")
    return me, solo, data


def test_single_creates_are_counted(made):
    me, solo, _ = made
    for _ in range(3):
        assert client_for(me).post("/api/v1/tasks", once(), format="json").status_code == 201
    assert client_for(me).post("/api/v1/tasks", once(team="data"), format="json").status_code == 201
    assert client_for(solo).post("/api/v1/tasks", once(), format="json").status_code == 201
    assert _listed(me) == 4 and _listed(solo) == 1
    assert_exact(me, solo)


def test_batch_creates_are_counted(made):
    me, solo, data = made
    body = {"tasks": [once() for _ in range(7)]}
    assert client_for(me).post("/api/v1/tasks/batch", body, format="json").status_code == 201
    # One statement of rows of several keys: the owner's, a team's, another user's.
    Task.objects.bulk_create(
        [TaskFactory.build(owner=me) for _ in range(3)]
        + [TaskFactory.build(owner=solo, team=data) for _ in range(4)]
        + [TaskFactory.build(owner=solo) for _ in range(2)]
    )
    assert _listed(me) == 7 + 3 + 4 and _listed(solo) == 2
    assert_exact(me, solo)


def test_deletes_are_counted(made):
    me, solo, data = made
    mine = TaskFactory.create_batch(5, owner=me)
    theirs = TaskFactory.create_batch(3, owner=solo, team=data)
    TaskFactory.create_batch(2, owner=solo)
    # The API's DELETE cancels a task (it stays listed): a cancelled task is counted.
    assert client_for(me).delete(f"/api/v1/tasks/{mine[0].pk}").status_code == 204
    mine[1].delete()
    Task.objects.filter(pk__in=[mine[2].pk, theirs[0].pk]).delete()
    assert _listed(me) == 3 + 2
    assert_exact(me, solo)
    solo.delete()  # their tasks go with them, in the team and out of it
    assert _listed(me) == 3
    assert_exact(me)


def test_moves_to_and_from_a_team_are_counted(made):
    me, solo, data = made
    mine = TaskFactory.create_batch(4, owner=me)
    Task.objects.filter(pk__in=[mine[0].pk, mine[1].pk]).update(team=data)
    assert_exact(me, solo)
    moved = Task.objects.get(pk=mine[0].pk)
    moved.team = None
    moved.save()
    assert_exact(me, solo)
    # To another owner, in the team and out of it.
    Task.objects.filter(pk=mine[1].pk).update(owner=solo)
    Task.objects.filter(pk=mine[2].pk).update(owner=solo)
    assert _listed(me) == 3 and _listed(solo) == 1
    assert_exact(me, solo)


def test_membership_changes_are_counted(made):
    me, solo, data = made
    TaskFactory.create_batch(3, owner=me, team=data)
    TaskFactory.create_batch(2, owner=solo)
    assert _listed(solo) == 2
    joined = Membership.objects.create(team=data, user=solo, role="viewer")
    assert _listed(solo) == 5
    assert_exact(me, solo)
    joined.delete()
    assert _listed(solo) == 2
    assert_exact(me, solo)


def _shard(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT mod(pg_backend_pid(), 32)").fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_two_transactions_create_tasks_of_one_owner_at_once():
    """Each adds to its own shard's row: the second does not wait for the first to commit, and
    both are counted."""
    me = UserFactory()
    template = TaskFactory(owner=me)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT string_agg(quote_ident(column_name), ', ') FROM information_schema.columns"
            " WHERE table_name = 'tasks_task' AND column_name <> 'id'"
        )
        (columns,) = cursor.fetchone()
    copy = (
        f"INSERT INTO tasks_task (id, {columns}) SELECT gen_random_uuid(), {columns}"
        " FROM tasks_task, generate_series(1, %s) WHERE id = %s"
    )
    first = psycopg.connect(database_url())
    conns = [first]
    try:
        # Two backends whose shards differ (one pair in 32 shares one, and would wait).
        while len(conns) < 8 and _shard(conns[-1]) == _shard(first):
            conns.append(psycopg.connect(database_url()))
        second = conns[-1]
        assert _shard(second) != _shard(first)
        first.execute(copy, [10, template.pk])
        # Not committed: a second writer of the same row would wait, and fail here.
        second.execute("SET lock_timeout = '5s'")
        second.execute(copy, [20, template.pk])
        first.commit()
        second.commit()
    finally:
        for conn in conns:
            conn.close()
    assert _listed(me) == 31
    assert_exact(me)


def test_the_migration_counts_the_tasks_there_are(made):
    """Migration 0047 fills the counts from the tasks it finds (its own frozen statement)."""
    me, solo, data = made
    TaskFactory.create_batch(3, owner=me)
    TaskFactory.create_batch(2, owner=solo, team=data)
    TaskFactory.create_batch(4, owner=solo)
    migration = importlib.import_module("tasks.migrations.0047_task_counts")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM tasks_taskcount")
        cursor.execute(migration.FILL)
    assert _listed(me) == 5 and _listed(solo) == 4
    assert_exact(me, solo)
