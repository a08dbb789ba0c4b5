"""Django's PostgreSQL backend; a `default` connection on a read-only server counts as unusable.

After a failover the old primary may come back as a standby, or be fenced read-only
(`default_transaction_read_only`), while connections to it stay open: every write on them fails
with "cannot execute ... in a read-only transaction" and Django, whose health check is a
`SELECT 1`, would keep them. Counting them unusable makes Django close them wherever it checks
(CONN_HEALTH_CHECKS at a request's or loop pass's first query, and after any database error),
and the reconnect lets libpq find the writable host (`target_session_attrs=read-write`). Both
values come with every answer from PostgreSQL 14 on (ParameterStatus): no extra round trip.
The `replica` alias is read-only by design and is left alone.

Each new connection also prices random reads as SSD and cloud storage have them
(`random_page_cost`, DATABASES' RANDOM_PAGE_COST; 0 leaves the server's): PostgreSQL's default, 4,
prices them as on a spinning disk, and picked a bitmap scan and a sort over a backward index scan
for a task's latest runs (the task list page: 5.2x -> 4.6x the floor in `bench api`;
docs/operations.md, Tuning). Set per session, not per server: it needs no privilege and passes
PgBouncer, which refuses the `options` startup parameter unless told to ignore it.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS
from django.db.backends.postgresql import base


def server_is_read_only(raw: object) -> bool:
    info = raw.info  # type: ignore[attr-defined]
    return "on" in (
        info.parameter_status("in_hot_standby"),
        info.parameter_status("default_transaction_read_only"),
    )


class DatabaseWrapper(base.DatabaseWrapper):
    def init_connection_state(self) -> None:
        super().init_connection_state()
        cost = float(self.settings_dict.get("RANDOM_PAGE_COST") or 0)
        if cost > 0 and self.connection is not None:
            with self.connection.cursor() as cursor:
                cursor.execute(f"SET random_page_cost = {cost}")

    def is_usable(self) -> bool:
        if not super().is_usable():
            return False
        return self.alias != DEFAULT_DB_ALIAS or not server_is_read_only(self.connection)
