"""New model instances built from their values by attribute name, the way the ORM builds the
rows it reads: positionally, every field's value given.

`Model(**values)` matches each keyword against every field and runs a descriptor per foreign
key; for the 1,000 tasks of a batch and their 1,000 runs that cost the API more CPU than
inserting them (tasks/transitions/inserts.py). A field `values` leaves out takes its default, as
with keywords.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Model

M = TypeVar("M", bound=Model)


def build(model: type[M], values: dict[str, Any], *, related: dict[str, Model] | None = None) -> M:
    """An unsaved instance of `model` with `values` (keys are attribute names: `task_id`, not
    `task`), each other field at its default. `related` names instances to keep as the foreign
    keys' related objects (`{"task": task}`), as `Model(task=task)` does; their ids must be in
    `values`."""
    fields = _fields(model)
    if unknown := values.keys() - _names(model):
        raise TypeError(f"{model.__name__} has no fields {sorted(unknown)}")
    obj = model(*[values[name] if name in values else default() for name, default in fields])
    for name, other in (related or {}).items():
        model._meta.get_field(name).set_cached_value(obj, other)  # type: ignore[union-attr]
    return obj


@functools.cache
def _fields(model: type[Model]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    return tuple((field.attname, field.get_default) for field in model._meta.concrete_fields)


@functools.cache
def _names(model: type[Model]) -> frozenset[str]:
    return frozenset(name for name, _ in _fields(model))
