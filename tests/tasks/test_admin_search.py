"""The console's searches by name: the task list's (each word in the name, the dedup key or the
owner's username) and the run list's (the runs of the tasks whose name holds the term), and the
trigram indexes that serve them where pg_trgm is installed (migration 0044)."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tasks.models import Run, Task
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def named() -> dict[str, Task]:
    alice, bob = UserFactory(username="Alice"), UserFactory(username="bob")
    return {
        "nightly": TaskFactory(owner=alice, name="Nightly report"),
        "weekly": TaskFactory(owner=bob, name="weekly REPORT", dedup_key="reports-weekly"),
        "backup": TaskFactory(owner=bob, name="backup", dedup_key="nightly-backup"),
        "alice's": TaskFactory(owner=alice, name="cleanup"),
    }


def shown(client: Client, model: str, term: str) -> set[str]:
    page = client.get(reverse(f"admin:tasks_{model}_changelist"), {"q": term})
    assert page.status_code == 200
    return {str(obj.pk) for obj in page.context["cl"].result_list}


def matching(tasks: dict[str, Task], term: str) -> set[str]:
    """What the search means, in Python: each word in the name or the dedup key (any case), or
    the owner's username (the whole of it, any case)."""
    found = set()
    for task in tasks.values():
        texts = [task.name.lower(), (task.dedup_key or "").lower()]
        owner = task.owner.username.lower()
        if all(any(w.lower() in t for t in texts) or w.lower() == owner for w in term.split()):
            found.add(str(task.pk))
    return found


@pytest.mark.parametrize(
    "term", ["report", "NIGHTLY", "nightly report", "alice", "bob weekly", "eport", "bo", "x"]
)
def test_the_task_search_matches_each_word_in_name_dedup_key_or_owner(
    operator, named, term
) -> None:
    assert shown(operator, "task", term) == matching(named, term)


def test_the_task_search_finds_an_owner_by_name_and_a_word_elsewhere(operator, named) -> None:
    assert shown(operator, "task", "alice report") == {str(named["nightly"].pk)}
    assert shown(operator, "task", "bob nightly") == {str(named["backup"].pk)}


def test_the_run_search_lists_every_run_of_the_tasks_whose_name_holds_it(operator, named) -> None:
    runs = {key: [RunFactory(task=task) for _ in range(3)] for key, task in named.items()}
    expected = {str(r.pk) for key in ("nightly", "weekly") for r in runs[key]}

    assert shown(operator, "run", "REPORT") == expected
    assert shown(operator, "run", "nightly report") == {str(r.pk) for r in runs["nightly"]}
    assert shown(operator, "run", "no such task") == set()
    assert len(expected) == 6 and Run.objects.count() == 12


def trigram_installed() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_trgm')")
        return bool(cursor.fetchone()[0])


def nodes(plan: dict) -> list[dict]:
    return [plan, *(node for child in plan.get("Plans", []) for node in nodes(child))]


def index_names(plan: dict) -> set[str]:
    return {node["Index Name"] for node in nodes(plan) if "Index Name" in node}


def tasks_read_whole(plan: dict) -> bool:
    return any(
        node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "tasks_task"
        for node in nodes(plan)
    )


def plan_of(sql: str, params: object) -> dict:
    """The plan of a statement with sequential scans priced out: which indexes can serve it
    (the test's few rows would otherwise be read whole, as they should be)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        [[explained]] = cursor.fetchall()
    if isinstance(explained, str):
        explained = json.loads(explained)
    return explained[0]["Plan"]


def search_statement(client: Client, model: str, term: str) -> str:
    """The statement of the list's search that matches names (the one with LIKE), as sent."""
    with CaptureQueriesContext(connection) as captured:
        client.get(reverse(f"admin:tasks_{model}_changelist"), {"q": term})
    [sql] = [q["sql"] for q in captured.captured_queries if " LIKE " in q["sql"]]
    return sql


def test_the_trigram_indexes_serve_the_searches_where_pg_trgm_is_installed(operator, named) -> None:
    if not trigram_installed():
        pytest.skip("pg_trgm is not available on this PostgreSQL: the searches read the table")
    task_search = search_statement(operator, "task", "nightly report")
    run_search = search_statement(operator, "run", "nightly report")

    # Every branch of the task search's OR (name, dedup key) by an index: the table is not read.
    # The dedup key's may be the unique key's, whose entries are the keys that are set.
    assert "task_name_trgm_idx" in index_names(plan_of(task_search, None))
    assert not tasks_read_whole(plan_of(task_search, None))
    assert "task_name_trgm_idx" in index_names(plan_of(run_search, None))
    assert not tasks_read_whole(plan_of(run_search, None))


def test_without_the_trigram_index_the_search_reads_the_tasks_table(operator, named) -> None:
    # The same statement priced the same way, with the index gone (as without pg_trgm): the
    # check above is a check of the index, not of the planner settings.
    if not trigram_installed():
        pytest.skip("pg_trgm is not available on this PostgreSQL")
    task_search = search_statement(operator, "task", "nightly report")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX task_name_trgm_idx")
        assert tasks_read_whole(plan_of(task_search, None))
        transaction.set_rollback(True)
