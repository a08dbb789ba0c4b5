"""A statement's generic plan, as the worker's connections keep it (runworker sets
force_generic_plan): PREPAREd with $n for its %(name)s parameters, EXPLAINed at execution with
the given values, in a transaction rolled back (what it wrote is undone, the statement
deallocated)."""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import connection, transaction
from psycopg import sql


def generic_plan(statement: str, params: dict[str, Any], *, options: str) -> dict:
    """The plan of `statement` (EXPLAIN's JSON, `options` such as "ANALYZE, FORMAT JSON")."""
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    prepared = re.sub(r"%\((\w+)\)s", number, statement).replace("%%", "%")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("PREPARE generic AS " + prepared)
        values = sql.SQL(", ").join(sql.Literal(params[name]) for name in names)
        explain = sql.SQL("EXPLAIN ({}) EXECUTE generic({})").format(sql.SQL(options), values)
        cursor.execute(explain.as_string(connection.connection))
        [[explained]] = cursor.fetchall()
        cursor.execute("DEALLOCATE generic")
        transaction.set_rollback(True)
    return (json.loads(explained) if isinstance(explained, str) else explained)[0]


def nodes(plan: dict) -> list[dict]:
    """`plan`'s node and every node under it."""
    return [plan, *(node for child in plan.get("Plans", []) for node in nodes(child))]
