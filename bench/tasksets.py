"""`python -m bench tasksets`: one task set of N entries through PUT /api/v1/tasksets/{name}
in-process (the view, its validation and the transitions), on a scratch database: a dry run and
an apply of N creates, a dry run and an apply with nothing changed, an apply of N updates, and
the set's delete. One line per step: seconds and the plan's counts; then the floor: the N
entries' validation alone (what every PUT step pays before planning or writing anything), in
the same run, so a step's figure can be read against this machine's load at the time."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from tasks.api.tasksets import declared_tasks
from tasks.db import db_now

URL = "/api/v1/tasksets/bench"


def body(n: int, hour: int) -> dict[str, Any]:
    entries = [
        {
            "key": f"k{i}",
            "kind": "handler",
            "payload": {"name": "noop"},
            "schedule": {"type": "cron", "expression": f"{i % 60} {hour} * * *"},
        }
        for i in range(n)
    ]
    return {"tasks": entries}


def measure(n: int) -> None:
    with override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"]):
        _measure(n)


def _measure(n: int) -> None:
    user, _ = get_user_model().objects.get_or_create(username="bench-tasksets")
    api = APIClient()
    api.force_authenticate(user)
    steps = [
        (f"dry run, {n} creates", body(n, 3), "?dry_run=true"),
        (f"apply, {n} creates", body(n, 3), ""),
        (f"dry run, {n} unchanged", body(n, 3), "?dry_run=true"),
        (f"apply, {n} unchanged", body(n, 3), ""),
        (f"apply, {n} updates", body(n, 4), ""),
    ]
    print(f"{'step':26} {'seconds':>8} {'create':>6} {'update':>6} {'unchanged':>9}")
    for label, sent, query in steps:
        started = time.perf_counter()
        response = api.put(URL + query, sent, format="json")
        seconds = time.perf_counter() - started
        assert response.status_code == 200, response.content[:300]
        plan = response.json()
        counts = len(plan["create"]), len(plan["update"]), plan["unchanged"]
        print(f"{label:26} {seconds:8.2f} {counts[0]:6d} {counts[1]:6d} {counts[2]:9d}")
    started = time.perf_counter()
    response = api.delete(URL)
    assert response.status_code == 200, response.content[:300]
    print(f"{f'delete, {n} tasks':26} {time.perf_counter() - started:8.2f}")
    request = Request(
        APIRequestFactory().put(URL, body(n, 3), format="json"), parsers=[JSONParser()]
    )
    request.user = user
    started = time.perf_counter()
    declared_tasks(request, db_now())
    print(f"{f'floor: validation of {n}':26} {time.perf_counter() - started:8.2f}")
