"""Limit keys below the API: setting a task's fields writes nothing, create and update resolve
the keys in the transaction that saves the task, and a task's limits never undo a key's own."""

from __future__ import annotations

import pytest
from rest_framework.test import APIRequestFactory

from tasks.api.serializers import TaskInputSerializer
from tasks.db import db_now
from tasks.models import ConcurrencyKey, RateKey, Task
from tasks.transitions import creation, limits
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

KEYS = {
    "concurrency": {"key": "db", "limit": 2, "scope": "owner"},
    "rate_limit": {"key": "crm-api", "limit": 10, "per": 60, "scope": "owner"},
}


def validated(owner, **fields) -> dict:
    request = APIRequestFactory().post("/api/v1/tasks")
    request.user = owner
    body = {"kind": "handler", "payload": {"name": "noop"}, **fields}
    serializer = TaskInputSerializer(data=body, context={"now": db_now(), "request": request})
    assert serializer.is_valid(), serializer.errors
    return dict(serializer.validated_data)


def test_apply_fields_sets_the_fields_and_writes_nothing(django_assert_num_queries) -> None:
    owner = UserFactory()
    data = validated(owner, **KEYS)
    task = Task(owner=owner, schedule=data["schedule"])
    with django_assert_num_queries(0):
        creation.apply_fields(task, data)
    assert (task.concurrency, task.rate_limit) == (KEYS["concurrency"], KEYS["rate_limit"])
    assert (task.concurrency_key_id, task.rate_key_id) == (None, None)
    assert not ConcurrencyKey.objects.exists() and not RateKey.objects.exists()


def test_a_batch_that_fails_leaves_no_key_behind() -> None:
    owner = UserFactory()
    global_key = RateKey.objects.create(name="mail", rate_limit=1, per_seconds=1, declared=True)
    items = [
        validated(owner, **KEYS),
        validated(owner, rate_limit={"key": "mail", "scope": "global"}),
    ]
    global_key.delete()  # an operator removes it between validation and the create
    with pytest.raises(ValueError, match="no global rate key 'mail'"):
        creation.create_tasks(owner=owner, items=items, now=db_now())
    assert not Task.objects.exists()
    assert not ConcurrencyKey.objects.exists() and not RateKey.objects.exists()


@pytest.mark.parametrize("kind", limits.KINDS, ids=lambda kind: kind.field)
def test_a_tasks_limits_never_undo_the_keys_own(kind: limits.Kind) -> None:
    owner = UserFactory()
    task_value = KEYS[kind.field]
    key_id = limits.resolve(kind, owner, task_value)
    seen_by_a_task = kind.model.objects.get(pk=key_id)  # read before an operator declares
    declared = {name: 7 for name in kind.limits}
    limits.set_limits(kind, kind.model.objects.get(pk=key_id), declared)
    limits.set_limits(kind, seen_by_a_task, {name: 1 for name in kind.limits}, declared=False)
    key = kind.model.objects.get(pk=key_id)
    assert key.declared
    assert {name: getattr(key, column) for name, column in kind.limits.items()} == declared
    # A later task naming the key resolves to it and leaves its limits alone.
    assert limits.resolve(kind, owner, {**task_value, "limit": 3}) == key_id
    key.refresh_from_db()
    assert {name: getattr(key, column) for name, column in kind.limits.items()} == declared
