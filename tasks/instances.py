"""New model instances built from their values by attribute name, the way the ORM builds the
rows it reads: positionally, every field's value given.

`Model(**values)` matches each keyword against every field and runs a descriptor per foreign
key; for the 1,000 tasks of a batch and their 1,000 runs that cost the API more CPU than
inserting them (tasks/transitions/inserts.py). A field `values` leaves out takes its default, as
with keywords.

A field's default that is the same value every time (a constant, NULL, "") is read once per
model: `Field.get_default` hands out the one object a non-callable default names, so an instance
gets what `Model(**values)` would give it; a callable default (a new id, a new dict) is called
for every instance.
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
    template, called, index, _ = _plan(model)
    if unknown := values.keys() - index.keys():
        raise TypeError(f"{model.__name__} has no fields {sorted(unknown)}")
    args = template.copy()
    for position, name, default in called:
        if name not in values:
            args[position] = default()
    for name, value in values.items():
        args[index[name]] = value
    obj = model(*args)
    for name, other in (related or {}).items():
        model._meta.get_field(name).set_cached_value(obj, other)  # type: ignore[union-attr]
    return obj


def values(model: type[Model], given: dict[str, Any]) -> dict[str, Any]:
    """Every field's value by attribute name, in the fields' order, as `build` gives them to a
    new instance: `given`, and each other field's default. What a row inserted without an
    instance (tasks/transitions/inserts.py, `insert_values`) is made of."""
    _, called, index, template = _plan(model)
    if unknown := given.keys() - index.keys():
        raise TypeError(f"{model.__name__} has no fields {sorted(unknown)}")
    row = template.copy()
    for _, name, default in called:
        if name not in given:
            row[name] = default()
    row.update(given)
    return row


@functools.cache
def _plan(
    model: type[Model],
) -> tuple[list[Any], list[tuple[int, str, Callable[[], Any]]], dict[str, int], dict[str, Any]]:
    """The arguments of an instance of `model` with every default that is the same each time,
    the defaults to call per instance (position, attribute, default), each attribute's
    position, and the arguments by attribute name."""
    template: list[Any] = []
    called = []
    for position, field in enumerate(model._meta.concrete_fields):
        # As Field.get_default reads them: `default` first, then `db_default` (an expression).
        if callable(field.default) if field.has_default() else field.has_db_default():
            called.append((position, field.attname, field.get_default))
            template.append(None)
        else:
            template.append(field.get_default())
    index = {field.attname: i for i, field in enumerate(model._meta.concrete_fields)}
    return template, called, index, dict(zip(index, template, strict=True))
