"""`python -m bench plans`: the API's prepared reads under each `plan_cache_mode`
(docs/operations.md, Tuning), and not prepared at all (`DATABASE_PREPARED_STATEMENTS=false`, for
a PgBouncer without prepared-statement support), on a scratch database seeded as `bench api`
seeds it.

Each read of the API is one prepared statement (tasks/api/json_sql.py). For each mode, on a new
connection with the API's `random_page_cost`, each read runs `repeat` times, interleaved; the
median time of the call (statement, transfer and psycopg) and how the server planned it
(`pg_prepared_statements`: generic and custom plans) are printed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.db import connection

from bench import apiserver
from tasks.api.json_sql import runs_json, runs_page_json, tasks_json, tasks_page_json
from tasks.models import Run, Task

# (label, plan_cache_mode, prepared statements)
MODES = (
    ("auto", "auto", True),
    ("force_generic_plan", "force_generic_plan", True),
    ("not prepared", "force_generic_plan", False),
)


def _reads(seeded: apiserver.Seeded) -> dict[str, Callable[[], object]]:
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.get(pk=seeded.owner)
    task, run, now = seeded.task_ids[0], seeded.run_ids[0], datetime.now(UTC)
    tasks = Task.objects.filter(owner=owner).order_by("-created_at").values_list("id", flat=True)
    runs = Run.objects.filter(task_id=task).order_by("-scheduled_at").values_list("id", flat=True)
    return {
        "task": lambda: tasks_json([task], owner=owner, now=now),
        "list page": lambda: tasks_page_json(tasks[100:150], tasks, owner=owner, now=now),
        "a task's runs": lambda: runs_page_json(runs[0:20], runs, owner_id=owner.pk),
        "a run": lambda: runs_json([run], owner_id=owner.pk),
    }


def measure(*, repeat: int, emit: Callable[[dict], None], write: Callable[[str], None]) -> None:
    seeded = apiserver.seed(username="bench-plans", tasks=1000, runs_per_task=20)
    reads = _reads(seeded)
    for label, mode, prepared in MODES:
        connection.close()  # a new connection: no prepared statement, the mode from its start
        connection.settings_dict.update(
            RANDOM_PAGE_COST=1.1, PLAN_CACHE_MODE=mode, PREPARED_STATEMENTS=prepared
        )
        times: dict[str, list[float]] = {name: [] for name in reads}
        for _ in range(repeat):
            for name, read in reads.items():
                started = time.perf_counter()
                read()
                times[name].append((time.perf_counter() - started) * 1000)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sum(generic_plans)::int, sum(custom_plans)::int FROM pg_prepared_statements"
            )
            generic, custom = cursor.fetchone()
        figures = {name: round(statistics.median(found), 3) for name, found in times.items()}
        emit(
            {
                "workload": "api prepared reads",
                "plan_cache_mode": mode,
                "prepared_statements": prepared,
                "repeat": repeat,
                "median_ms": figures,
                "generic_plans": generic,
                "custom_plans": custom,
            }
        )
        write(
            f"{label}: "
            + ", ".join(f"{name} {ms} ms" for name, ms in figures.items())
            + f" (plans: {generic} generic, {custom} custom)"
        )
    connection.close()
    connection.settings_dict.update(
        RANDOM_PAGE_COST=0.0, PLAN_CACHE_MODE="", PREPARED_STATEMENTS=True
    )
