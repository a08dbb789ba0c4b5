"""`python -m bench batch`: the API's CPU per created task on POST /api/v1/tasks/batch,
in-process (the view: parsing, validation, `create_tasks`), on a scratch database.

Each round posts one batch of N one-time tasks due now (what a job queue's client sends) and
measures this process's CPU time (`time.process_time`: the API's share, not PostgreSQL's), then
`create_tasks` alone on N bodies validated beforehand; the difference is what parsing and
validating a body costs. The median round of each is printed as CPU-ms per task.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient, APIRequestFactory

from tasks.api.serializers import TaskInputSerializer
from tasks.db import db_now
from tasks.transitions.creation import create_tasks

URL = "/api/v1/tasks/batch"


def bodies(n: int) -> list[dict[str, Any]]:
    return [
        {"kind": "handler", "payload": {"name": "noop"}, "schedule": {"type": "once"}}
        for _ in range(n)
    ]


def measure(*, n: int, rounds: int) -> None:
    with override_settings(ALLOWED_HOSTS=[*settings.ALLOWED_HOSTS, "testserver"]):
        _measure(n, rounds)


def _measure(n: int, rounds: int) -> None:
    user, _ = get_user_model().objects.get_or_create(username="bench-batch")
    api = APIClient()
    api.force_authenticate(user)
    request = APIRequestFactory().post(URL)
    request.user = user
    route: list[float] = []
    create: list[float] = []
    for _ in range(rounds):
        sent = {"tasks": bodies(n)}
        started = time.process_time()
        response = api.post(URL, sent, format="json")
        route.append(time.process_time() - started)
        assert response.status_code == 201, response.content[:300]
        now = db_now()
        context = {"now": now, "multipart": False, "request": request}
        items = []
        for body in bodies(n):
            one = TaskInputSerializer(data=body, context=context)
            one.is_valid(raise_exception=True)
            items.append(one.validated_data)
        started = time.process_time()
        create_tasks(owner=user, items=items, now=now)
        create.append(time.process_time() - started)
    whole, alone = statistics.median(route), statistics.median(create)
    print(f"{n} one-time tasks per batch, median of {rounds} rounds, CPU-ms per task:")
    print(f"  {'POST /api/v1/tasks/batch':32} {1000 * whole / n:6.3f}")
    print(f"  {'  create_tasks':32} {1000 * alone / n:6.3f}")
    print(f"  {'  parsing and validation':32} {1000 * (whole - alone) / n:6.3f}")
