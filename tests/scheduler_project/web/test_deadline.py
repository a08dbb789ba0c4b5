"""A request's deadline refuses its first statement when it would start after it, on Django's
cursor and on the prepared cursor; a request that started its work in time finishes it."""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction

from scheduler_project.web.deadline import Deadline, DeadlineExceeded, enforced
from tasks.db import prepared_cursor
from tasks.models import Task
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_statements_before_the_deadline_run() -> None:
    with enforced(Deadline(time.monotonic() + 60)) as deadline, connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert not deadline.exceeded


def test_a_statement_after_the_deadline_is_refused_on_both_cursors() -> None:
    with enforced(Deadline(time.monotonic() - 0.1)) as deadline:
        with pytest.raises(DeadlineExceeded), connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        with pytest.raises(DeadlineExceeded), prepared_cursor() as prepared:
            prepared.execute("SELECT 1", {})
    assert deadline.exceeded
    with connection.cursor() as cursor:  # past the block, statements run again
        cursor.execute("SELECT 1")


def test_a_request_that_started_its_work_in_time_finishes_it() -> None:
    task = TaskFactory(name="before")
    deadline = Deadline(time.monotonic() + 60)
    with enforced(deadline), transaction.atomic():
        Task.objects.filter(pk=task.pk).update(name="changed")
        deadline.at = time.monotonic() - 0.1  # a slow request, past its deadline now
        with transaction.atomic():
            Task.objects.filter(pk=task.pk).update(name="changed again")
    task.refresh_from_db()
    assert task.name == "changed again"
    assert not deadline.exceeded


def test_a_transaction_whose_first_statement_is_late_does_nothing() -> None:
    task = TaskFactory(name="before")
    deadline = Deadline(time.monotonic() - 0.1)
    with enforced(deadline), pytest.raises(DeadlineExceeded), transaction.atomic():
        with transaction.atomic():  # a savepoint's statements always run
            Task.objects.filter(pk=task.pk).update(name="changed")
    task.refresh_from_db()
    assert task.name == "before"
