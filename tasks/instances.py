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


def build(model: type[M], given: dict[str, Any], *, related: dict[str, Model] | None = None) -> M:
    """An unsaved instance of `model` with `given` (keys are attribute names: `task_id`, not
    `task`), each other field at its default (`values`, in the fields' order: positional
    arguments). `related` names instances to keep as the foreign keys' related objects
    (`{"task": task}`), as `Model(task=task)` does; their ids must be in `given`."""
    obj = model(*values(model, given).values())
    for name, other in (related or {}).items():
        model._meta.get_field(name).set_cached_value(obj, other)  # type: ignore[union-attr]
    return obj


def values(model: type[Model], given: dict[str, Any]) -> dict[str, Any]:
    """Every field's value by attribute name, in the fields' order, as `build` gives them to a
    new instance: `given`, and each other field's default. What a row inserted without an
    instance (tasks/transitions/inserts.py, `insert_values`) is made of."""
    called, template = _plan(model)
    if unknown := given.keys() - template.keys():
        raise TypeError(f"{model.__name__} has no fields {sorted(unknown)}")
    row = template.copy()  # ordered as the fields: `given` only replaces values
    for name, default in called:
        if name not in given:
            row[name] = default()
    row.update(given)
    return row


@functools.cache
def _plan(model: type[Model]) -> tuple[list[tuple[str, Callable[[], Any]]], dict[str, Any]]:
    """The defaults of `model` to call per instance (attribute, default), and every field's
    value by attribute name in the fields' order, with each default that is the same each time
    (None where it is called)."""
    template: dict[str, Any] = {}
    called = []
    for field in model._meta.concrete_fields:
        # As Field.get_default reads them: `default` first, then `db_default` (an expression).
        if callable(field.default) if field.has_default() else field.has_db_default():
            called.append((field.attname, field.get_default))
            template[field.attname] = None
        else:
            template[field.attname] = field.get_default()
    return called, template
