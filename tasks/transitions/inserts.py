"""Model instances inserted many at once by a named statement of sql/inserts.sql: their columns
as one JSON array, which PostgreSQL reads as the table's row type.

What the ORM's `bulk_create` does per row and field (a prepared value each, then an array dumped
per column, element by element) cost more CPU than the rest of the batch route; here a row is a
dict of its instance's attributes and the array is encoded in one `json.dumps`. Fields that
compute their value when saved (`auto_now`, `auto_now_add`, a file to commit) go through their
own `pre_save`, as the ORM's save does. No signals are sent, as with `bulk_create`.

The batch route's tasks and runs come as rows, not instances (`insert_values`): every field's
value by attribute name, as `instances.values` fills them, which is what an instance built from
the same values would hold. Building 2,000 model instances (`Model.__init__`, a descriptor per
foreign key, the fields' defaults) cost the route as much as encoding and inserting them. A row's
times of its save are `timezone.now()`, as a DateTimeField's `pre_save` sets them; any other
field computed when saved (an executable's file) goes through its `pre_save` on an instance.

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
from django.utils import timezone

from scheduler_project.sql import queries
from tasks import instances
from tasks.db import prepared_cursor
from tasks.models import Run, Task

SQL = queries("tasks", "inserts.sql")
STATEMENTS: dict[type[Model], str] = {Task: "insert_tasks", Run: "insert_runs"}


def insert(objs: Sequence[Model]) -> None:
    """INSERT `objs` (new instances of one model of STATEMENTS, primary keys set) in one
    statement, inside the caller's transaction; marks them saved as `bulk_create` does."""
    if not objs:
        return
    _execute(type(objs[0]), rows_json(objs))
    mark_saved(objs)


def mark_saved(objs: Sequence[Model]) -> None:
    """Mark instances of rows just inserted as saved, as `bulk_create` does."""
    for obj in objs:
        obj._state.adding = False
        obj._state.db = connection.alias


def insert_values(model: type[Model], rows: Sequence[dict[str, Any]]) -> None:
    """INSERT `rows` of `model` (one of STATEMENTS), each every field's value by attribute name
    (`instances.values`), in one statement inside the caller's transaction. The fields computed
    when saved are set in each row first, as an instance's save sets them."""
    if not rows:
        return
    _, saved = _columns(model)
    for row in rows:
        for _, field in saved:
            row[field.attname] = _saved_value(model, field, row)
    _execute(model, _encode([_row(model, row) for row in rows], model))


def _saved_value(model: type[Model], field: Field, row: dict[str, Any]) -> Any:
    if isinstance(field, DateTimeField):  # auto_now or auto_now_add (`_computed_when_saved`)
        return timezone.now()
    if row[field.attname] is None:
        return _saved_when_none(model, field)
    obj = instances.build(model, row)
    return field.get_prep_value(field.pre_save(obj, True))


@functools.cache
def _saved_when_none(model: type[Model], field: Field) -> Any:
    # An empty file field's `pre_save` gives the same value every time: computed once.
    obj = instances.build(model, {})
    return field.get_prep_value(field.pre_save(obj, True))


def _execute(model: type[Model], rows: str) -> None:
    # Bound on the server: Django's cursor would quote the megabyte of JSON into the statement's
    # text (libpq's PQescapeLiteral, a twentieth of the batch route's CPU).
    with prepared_cursor() as cursor:
        cursor.execute(SQL[STATEMENTS[model]], {"rows": rows})


def rows_json(objs: Sequence[Model]) -> str:
    """The JSON array of `objs`' rows, each an object of every column of their table."""
    model = type(objs[0])
    plain, saved = _columns(model)
    rows = []
    for obj in objs:
        values = vars(obj)
        row = {column: values[attname] for column, attname in plain}
        for column, field in saved:
            row[column] = field.get_prep_value(field.pre_save(obj, True))
        rows.append(row)
    return _encode(rows, model)


def _row(model: type[Model], values: dict[str, Any]) -> dict[str, Any]:
    """A row by column from values by attribute name (the fields computed when saved set)."""
    names = _renamed(model)
    return {names.get(name, name): value for name, value in values.items()} if names else values


@functools.cache
def _renamed(model: type[Model]) -> dict[str, str]:
    """The attributes whose column has another name (none in Task and Run today)."""
    return {
        field.attname: str(field.column)
        for field in model._meta.concrete_fields
        if field.attname != field.column
    }


def _encode(rows: list[dict[str, Any]], model: type[Model]) -> str:
    times = _datetime_columns(model)
    for i, row in enumerate(rows):
        shifted = {
            column: at.isoformat()
            for column in times
            if isinstance(at := row[column], datetime) and at.tzinfo is not UTC
        }
        if shifted:  # a copy: the caller's row keeps its datetimes
            rows[i] = {**row, **shifted}
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
