"""Read replica routing: the API's GET requests read from `replica`; everything else, primary.

Enabled by DATABASE_REPLICA_URL (settings.py adds the alias, the router and the middleware).
Only reads made while `ReplicaReadMiddleware` marks a GET or HEAD request under /api/ go to the
replica. The scheduler, worker and reviewer never pass through the middleware, so every query
they make, and every write anywhere, stays on the primary. The admin, /health and /metrics stay
on the primary too: operators act on what they read there, so it must not lag.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse

REPLICA = "replica"
_read_from_replica: ContextVar[bool] = ContextVar("read_from_replica", default=False)

SAFE_METHODS = ("GET", "HEAD")
REPLICA_PREFIXES = ("/api/v1/",)


class ReplicaRouter:
    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        # Inside a transaction on the primary, reads must see its own uncommitted writes.
        if _read_from_replica.get() and not transaction.get_connection().in_atomic_block:
            return REPLICA
        return None  # the default: the primary

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # both aliases hold the same data

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == "default"  # the replica follows the primary's schema by replication


class ReplicaReadMiddleware:
    """Marks safe API requests so their ORM reads go to the replica for the request's duration."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        use = request.method in SAFE_METHODS and request.path.startswith(REPLICA_PREFIXES)
        token = _read_from_replica.set(use)
        try:
            return self.get_response(request)
        finally:
            _read_from_replica.reset(token)


def reading_from_replica() -> bool:
    return _read_from_replica.get()
