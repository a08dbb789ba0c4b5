"""Model instances inserted many at once by a named statement of sql/inserts.sql: their columns
as one JSON array, which PostgreSQL reads as the table's row type.

What the ORM's `bulk_create` does per row and field (a prepared value each, then an array dumped
per column, element by element) cost more CPU than the rest of the batch route; here a row is a
dict of its instance's attributes and the array is encoded in one `json.dumps`. Fields that
compute their value when saved (`auto_now`, `auto_now_add`, a file to commit) go through their
own `pre_save`, as the ORM's save does. No signals are sent, as with `bulk_create`.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import DateField, Field, Model

from scheduler_project.sql import queries
from tasks.models import Run, Task

SQL = queries("tasks", "inserts.sql")
STATEMENTS: dict[type[Model], str] = {Task: "insert_tasks", Run: "insert_runs"}


def insert(objs: Sequence[Model]) -> None:
    """INSERT `objs` (new instances of one model of STATEMENTS, primary keys set) in one
    statement, inside the caller's transaction; marks them saved as `bulk_create` does."""
    if not objs:
        return
    model = type(objs[0])
    with connection.cursor() as cursor:
        cursor.execute(SQL[STATEMENTS[model]], {"rows": rows_json(objs)})
    for obj in objs:
        obj._state.adding = False
        obj._state.db = connection.alias


def rows_json(objs: Sequence[Model]) -> str:
    """The JSON array of `objs`' rows, each an object of every column of their table."""
    plain, saved = _columns(type(objs[0]))
    rows = []
    for obj in objs:
        values = vars(obj)
        row = {column: values[attname] for column, attname in plain}
        for column, field in saved:
            row[column] = field.get_prep_value(field.pre_save(obj, True))
        rows.append(row)
    return json.dumps(rows, default=_json_value, allow_nan=False)


@functools.cache
def _columns(model: type[Model]) -> tuple[list[tuple[str, str]], list[tuple[str, Field]]]:
    """(column, attribute) of the fields whose attribute is the value to store, and (column,
    field) of those whose `pre_save` computes it."""
    plain: list[tuple[str, str]] = []
    saved: list[tuple[str, Field]] = []
    for field in model._meta.concrete_fields:
        column = str(field.column)  # a concrete field always has one
        if _computed_when_saved(field):
            saved.append((column, field))
        else:
            plain.append((column, field.attname))
    return plain, saved


def _computed_when_saved(field: Field) -> bool:
    if isinstance(field, DateField):  # its pre_save only fills auto_now and auto_now_add
        return bool(field.auto_now or field.auto_now_add)
    return type(field).pre_save is not Field.pre_save


def _json_value(value: Any) -> Any:
    # Full precision: DjangoJSONEncoder would cut a datetime to milliseconds.
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a column value inserts.py can write")
