"""Model instances inserted many at once by a named statement of sql/inserts.sql: their columns
as one JSON array, which PostgreSQL reads as the table's row type.

What the ORM's `bulk_create` does per row and field (a prepared value each, then an array dumped
per column, element by element) cost more CPU than the rest of the batch route; here a row is a
dict of its instance's attributes and the array is encoded in one `json.dumps`. Fields that
compute their value when saved (`auto_now`, `auto_now_add`, a file to commit) go through their
own `pre_save`, as the ORM's save does. No signals are sent, as with `bulk_create`.

The array is written by orjson, ten times faster than the standard library's encoder with a
`default` per datetime and id (which took a quarter of the batch route's `create_tasks`); the
text PostgreSQL reads is the same: orjson writes ids and datetimes as `str` and `isoformat` do,
but an offset of seconds (a zone's local mean time before 1900), which it rounds to the minute:
a datetime column not in UTC is written by `isoformat` beforehand. Anything orjson refuses (an
integer wider than 64 bits in a payload, text with a lone surrogate) is written by the standard
library's encoder instead, so the JSON, or its error, is what it was. orjson writes NaN as null
where `allow_nan=False` refuses it: no float of a validated body is NaN (DRF's FloatField and
JSONField refuse it).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
from django.db import connection
from django.db.models import DateField, DateTimeField, Field, Model

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
    times = _datetime_columns(type(objs[0]))
    rows = []
    for obj in objs:
        values = vars(obj)
        row = {column: values[attname] for column, attname in plain}
        for column, field in saved:
            row[column] = field.get_prep_value(field.pre_save(obj, True))
        for column in times:
            at = row[column]
            if isinstance(at, datetime) and at.tzinfo is not UTC:
                row[column] = at.isoformat()
        rows.append(row)
    try:
        return orjson.dumps(rows, default=_json_value).decode()
    except orjson.JSONEncodeError:
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


@functools.cache
def _datetime_columns(model: type[Model]) -> tuple[str, ...]:
    return tuple(
        str(field.column)
        for field in model._meta.concrete_fields
        if isinstance(field, DateTimeField)
    )


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
