"""`python -m bench visible`: a team member's task list against a personal list of as many
tasks (the floor), on a scratch database: the cost of seeing "mine or my teams'"
(accounts/access.py) over seeing "mine".

Seeded: `--others` users with `--tasks` personal tasks each (rows nobody measured sees); three
teams of `--tasks` tasks each, two of which the member is in; the member with `--own` personal
tasks; the solo user (in no team) with as many personal tasks as the member sees. For each of
the two, `repeat` times, interleaved: the list's first page as the API reads and writes it
with a filter or another order (`access.visible_page`, `tasks_page_json`, here ordered by
`-created_at` then `id`, 50 a page: wall time of the call) and as it reads the default list
(`visible_tasks_page_json`: one named statement, the same page and count); the server's
`Execution Time` of EXPLAIN ANALYZE for the ORM's page ids and for its count (`SELECT count(*)`
of `access.visible_counted`; and, for comparison, of the OR's count, as the list counted
before), the reads the visibility condition shapes. Medians printed, with the plans' top two
nodes, the indexes they read and the rows they scanned.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet

from accounts import access
from accounts.models import Membership, Team
from bench import data
from tasks.api.json_sql import tasks_page_json, visible_tasks_page_json
from tasks.models import Task

PAGE = 50
HOURLY = {"type": "interval", "every": 3600, "start_at": "2025-01-01T00:00:00Z"}


def _tasks(owner: int, count: int, prefix: str) -> list[Any]:
    return data.insert_tasks(
        owner,
        count,
        raw_schedule=HOURLY,
        next_unplanned_at=datetime.now(UTC) + timedelta(hours=1),
        prefix=prefix,
    )


def seed(*, others: int, tasks: int, own: int) -> dict[str, Any]:
    """The rows (module docstring); returns the member and the solo user."""
    users = get_user_model().objects
    for i in range(others):
        _tasks(data.owner_id(f"bench-other-{i}"), tasks, f"other {i} ")
    member = users.get(pk=data.owner_id("bench-member"))
    for slug in ("alpha", "beta", "gamma"):
        team = Team.objects.create(slug=slug)
        maker = data.owner_id(f"bench-{slug}")
        Membership.objects.create(team=team, user_id=maker, role="editor")
        if slug != "gamma":
            Membership.objects.create(team=team, user=member, role="viewer")
        Task.objects.filter(pk__in=_tasks(maker, tasks, f"{slug} ")).update(team=team)
    _tasks(member.pk, own, "member ")
    solo = users.get(pk=data.owner_id("bench-solo"))
    _tasks(solo.pk, access.visible(Task.objects.all(), member).count(), "solo ")
    data.vacuum_analyze()
    return {"member": member, "solo": solo}


def _executed(queryset: QuerySet, *, counted: bool = False) -> tuple[float, str]:
    """The server's execution time (ms) of `queryset` (`counted`: of its count, as the list's
    statement counts it, `count_of_list`) under EXPLAIN ANALYZE, and its plan in short: the top
    two nodes, the indexes read and the rows their scans returned."""
    sql, params = queryset.query.sql_with_params()
    if counted:
        sql = f"SELECT count(*) FROM ({sql}) AS counted"
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        (found,) = cursor.fetchone()
    plan = (json.loads(found) if isinstance(found, str) else found)[0]
    top = [plan["Plan"]["Node Type"], *(p["Node Type"] for p in plan["Plan"].get("Plans", [])[:1])]
    indexes: dict[str, int] = {}
    stack = [plan["Plan"]]
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", []))
        if "Index Name" in node:
            # An index-only scan says so: its rows are read without the table.
            only = " only" if node["Node Type"] == "Index Only Scan" else ""
            name = node["Index Name"] + only
            indexes[name] = indexes.get(name, 0) + int(node["Actual Rows"] * node["Actual Loops"])
    read = ", ".join(f"{name} ({rows} rows)" for name, rows in sorted(indexes.items()))
    return float(plan["Execution Time"]), f"{' > '.join(top)}; {read}"


def measure(
    *, others: int, tasks: int, own: int, repeat: int, emit: Callable[[dict], None], write: Any
) -> None:
    started = time.monotonic()
    who = seed(others=others, tasks=tasks, own=own)
    write(f"seeded {Task.objects.count()} tasks in {time.monotonic() - started:.1f} s")
    times: dict[str, dict[str, list[float]]] = {
        name: {"call": [], "named": [], "page": [], "count": [], "count_or": []} for name in who
    }
    plans: dict[str, dict[str, str]] = {name: {} for name in who}
    for _ in range(repeat):
        for name, user in who.items():
            # As the API's list (tasks/api/views.py TaskListCreateView.list) reads its page.
            listed = Task.objects.order_by("-created_at", "id").values_list("id", flat=True)
            counted = access.visible_counted(listed, user)
            first = access.visible_page(listed, user, 0, PAGE)
            now = datetime.now(UTC)
            began = time.perf_counter()
            page, total = tasks_page_json(first, counted, owner=user, now=now)
            times[name]["call"].append((time.perf_counter() - began) * 1000)
            assert len(page) == PAGE and total is not None
            # The default list (no filter, newest first) as the API reads it now: one named
            # statement (tasks_visible_page), its parts written in SQL, not by the ORM.
            began = time.perf_counter()
            named, named_total = visible_tasks_page_json(owner=user, low=0, high=PAGE, now=now)
            times[name]["named"].append((time.perf_counter() - began) * 1000)
            assert [t.text for t in named] == [t.text for t in page] and named_total == total
            # The count as the list read it before it was counted by parts: the OR.
            ored = access.visible(listed, user).order_by().values("pk")
            for read, queryset in (("page", first), ("count", counted), ("count_or", ored)):
                ms, plans[name][read] = _executed(queryset, counted=read != "page")
                times[name][read].append(ms)
    result = {
        "workload": "visible",
        "tasks": Task.objects.count(),
        "visible": access.visible(Task.objects.all(), who["member"]).count(),
        "repeat": repeat,
        **{
            f"{name}_{read}_ms": round(statistics.median(values), 3)
            for name, reads in times.items()
            for read, values in reads.items()
        },
        "plans": plans,
    }
    emit(result)
    write("")
    write(
        "| list | API call (page 1), ORM's parts | named statement | page ids | count"
        " | count by the OR |"
    )
    write("| --- | --- | --- | --- | --- | --- |")
    for name in who:
        reads = ("call", "named", "page", "count", "count_or")
        cells = [f"{result[f'{name}_{read}_ms']:.2f} ms" for read in reads]
        write(f"| {name} | {' | '.join(cells)} |")
    for name in who:
        shown = "; ".join(f"{read} {plan}" for read, plan in plans[name].items())
        write(f"{name}: {shown}")
