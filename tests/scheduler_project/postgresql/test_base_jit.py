"""Every role's connections run without JIT compilation (scheduler_project/postgresql): a
statement whose cost estimate passes `jit_above_cost` is planned without it."""

from __future__ import annotations

import pytest
from django.db import connection

from tasks.db import prepared_cursor

pytestmark = pytest.mark.django_db

# Estimated at about 22 million, far past the default jit_above_cost of 100,000.
COSTLY = (
    "EXPLAIN (FORMAT JSON) SELECT count(*) FROM generate_series(1, 1000) a,"
    " generate_series(1, 1000) b, generate_series(1, 1000) c"
)


def test_a_costly_statement_is_planned_without_jit() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
        cursor.execute("SHOW jit_above_cost")
        assert float(cursor.fetchone()[0]) <= 100_000
        cursor.execute(COSTLY)
        plan = cursor.fetchone()[0][0]
    assert plan["Plan"]["Total Cost"] > 1_000_000
    assert "JIT" not in plan


def test_the_prepared_reads_cursor_runs_without_jit_too() -> None:
    with prepared_cursor() as cursor:
        cursor.execute("SHOW jit", {})
        assert cursor.fetchall() == [("off",)]
