"""Each connection prices random reads as SSD storage has them (scheduler_project/postgresql,
DATABASE_RANDOM_PAGE_COST), so a task's latest runs are read by a backward index scan; 0 leaves
the server's setting."""

from __future__ import annotations

import pytest
from django.db import connection, connections

from scheduler_project.database import databases
from tasks.db import connect

pytestmark = pytest.mark.django_db


def _shown(conn) -> str:
    with conn.cursor() as cursor:
        cursor.execute("SHOW random_page_cost")
        return cursor.fetchone()[0]


def test_every_connection_prices_random_reads_as_ssd_by_default() -> None:
    assert _shown(connection) == "1.1"


def _servers() -> str:
    with connect() as raw:  # a plain psycopg connection: the server's own setting
        return raw.execute("SHOW random_page_cost").fetchone()[0]


@pytest.mark.parametrize(("cost", "shown"), [(0.0, None), (2.5, "2.5")])
def test_the_setting_is_applied_to_new_connections(cost: float, shown: str | None) -> None:
    wrapper = connections.create_connection("default")
    wrapper.settings_dict["RANDOM_PAGE_COST"] = cost
    try:
        assert _shown(wrapper) == (shown or _servers())
    finally:
        wrapper.close()


def test_databases_carry_the_setting_to_the_replica_too() -> None:
    found = databases("postgres://u@h/db", "postgres://u@r/db", conn_max_age=0,
                      application_name="x", random_page_cost=1.1)  # fmt: skip
    assert found["default"]["RANDOM_PAGE_COST"] == found["replica"]["RANDOM_PAGE_COST"] == 1.1
