"""tasks/instances.py: an instance built positionally is the one `Model(**values)` makes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks import instances
from tasks.models import Run, Task

AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_a_built_instance_has_the_values_given_and_every_other_default() -> None:
    task = Task(owner_id=1, schedule={"type": "once"}, priority=9)
    values = {"task_id": task.pk, "owner_id": 1, "scheduled_at": AT, "execute_at": AT}
    built = instances.build(Run, values, related={"task": task})
    made = Run(task=task, owner_id=1, scheduled_at=AT, execute_at=AT)
    assert built.task is task
    assert built._state.adding
    assert {**_fields(built), "id": None} == {**_fields(made), "id": None}
    assert built.id and built.id != made.id  # a default called per instance


def test_a_name_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="task"):
        instances.build(Run, {"task": None})


def test_defaults_are_the_ones_the_model_gives_and_a_callable_one_is_called_each_time() -> None:
    """Constant defaults are read once per model; `default=dict` must still be a new dict per
    instance (a shared one would be changed through every task)."""
    first, second = (instances.build(Task, {"owner_id": 1}) for _ in range(2))
    made = Task(owner_id=1)
    assert {**_fields(first), "id": None} == {**_fields(made), "id": None}
    assert first.payload == {} and first.payload is not second.payload
    assert first.notify == [] and first.notify is not second.notify
    assert first.status == Task.Status.ACTIVE and first.executable_name == ""
