"""GET /health and /health/live (docs/api.md): per-component checks, our status and JSON.

Each component is a django-health-check `HealthCheck`: `ServiceUnavailable` means down (the probe
answers 503), `ServiceWarning` means degraded but working (reported; still 200). The checks run
one after another in the request thread on its own connection, each in a savepoint: they are
single cheap queries, and the library's async runner would give every check a thread with a
database connection of its own.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import timeit
from datetime import timedelta
from typing import Any, ClassVar

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.models import F, Max, Min
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from health_check.base import HealthCheck, HealthCheckResult
from health_check.checks import Database
from health_check.exceptions import HealthCheckException, ServiceUnavailable, ServiceWarning
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasks.db import db_now
from tasks.models import Process
from tasks.processes import executables_unavailable, worker_sandboxes
from tasks.transitions.claim import DUE_WAITING_SINCE_SQL

logger = logging.getLogger(__name__)

ROLES = ("scheduler", "worker", "reviewer")
# Migrations only change with a deploy; a positive answer is reused this long per process.
MIGRATIONS_RECHECK_SECONDS = 60.0
_migrations_ok_until = 0.0


@dataclasses.dataclass
class Component(HealthCheck):
    """A check that also reports figures (`details`) next to its status."""

    critical: ClassVar[bool] = True
    details: dict[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False)


@dataclasses.dataclass
class DatabaseCheck(Database):
    """Reachable (the library's SELECT 1), writable, and every migration on disk applied."""

    critical: ClassVar[bool] = True
    details: dict[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False)

    def run(self) -> None:
        global _migrations_ok_until
        super().run()
        with connection.cursor() as cursor:  # a standby answers SELECT 1 too
            cursor.execute(
                "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool"
            )
            if cursor.fetchone()[0]:
                raise ServiceUnavailable("read-only: a standby, or a primary being failed over")
        if time.monotonic() < _migrations_ok_until:
            return
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if plan:
            names = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
            self.details["unapplied_migrations"] = names
            raise ServiceUnavailable(f"{len(names)} migrations not applied")
        _migrations_ok_until = time.monotonic() + MIGRATIONS_RECHECK_SECONDS


@dataclasses.dataclass
class RoleCheck(Component):
    """Processes of one role alive by their heartbeat row; down when none is."""

    role: str = "worker"

    def run(self) -> None:
        now = db_now()
        dead_after = timedelta(seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS)
        processes = Process.objects.filter(role=self.role)
        alive = list(
            processes.filter(stopped_at__isnull=True, last_seen_at__gte=now - dead_after)
            .order_by("-last_seen_at")
            .values("name", "host", "pid", last_seen=F("last_seen_at"))[:100]
        )
        last_seen = processes.aggregate(last=Max("last_seen_at"))["last"]
        self.details.update(alive=len(alive), last_seen=last_seen, processes=alive)
        if not alive:
            seconds = dead_after.total_seconds()
            raise ServiceUnavailable(f"no {self.role} has been seen for {seconds:g} s")


@dataclasses.dataclass
class QueueCheck(Component):
    """How long the oldest due run has waited to start (a backfilled one since its backfill, not
    since the past occurrence it records); down past TASKS_START_SLA_SECONDS."""

    def run(self) -> None:
        now = db_now()
        with connection.cursor() as cursor:
            cursor.execute(DUE_WAITING_SINCE_SQL)
            earliest = cursor.fetchone()[0]
        age = max(0.0, (now - earliest).total_seconds()) if earliest else 0.0
        sla = settings.TASKS_START_SLA_SECONDS
        self.details.update(oldest_due_seconds=round(age, 3), sla_seconds=sla)
        if age > sla:
            raise ServiceUnavailable(f"the oldest due run has waited {age:.0f} s (SLA {sla:g} s)")


@dataclasses.dataclass
class ExecutablesCheck(Component):
    """Whether each live worker can run executables (its sandbox, as found at its last
    heartbeat): degraded, not down, when one cannot (every other kind still runs)."""

    critical: ClassVar[bool] = False

    def run(self) -> None:
        dead_after = settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS
        with connection.cursor() as cursor:
            workers = worker_sandboxes(cursor, dead_after_seconds=dead_after)
        unable = [w for w in workers if not w.mode]
        self.details.update(
            available=not executables_unavailable(workers),
            workers=[
                {
                    "name": w.name,
                    "host": w.host,
                    "pid": w.pid,
                    "sandbox": w.mode or None,
                    "error": w.error,
                }
                for w in workers
            ],
        )
        if not workers:
            raise ServiceWarning(executables_unavailable(workers))
        if unable:
            reasons = "; ".join(sorted({w.error for w in unable}))
            raise ServiceWarning(
                f"{len(unable)} of {len(workers)} live workers cannot run executables: {reasons}"
            )


@dataclasses.dataclass
class NotificationsCheck(Component):
    """Age of the oldest pending delivery: a warning only, never a failed probe."""

    critical: ClassVar[bool] = False

    def run(self) -> None:
        try:
            from notifications.models import Notification
        except ImportError:  # the notifications app is optional to this check
            self.details["available"] = False
            return
        now = db_now()
        pending = Notification.objects.filter(status="pending")  # notification_pending_idx
        oldest = pending.aggregate(oldest=Min("created_at"))["oldest"]
        age = (now - oldest).total_seconds() if oldest else 0.0
        warn_after = settings.SCHEDULER_HEALTH_NOTIFICATION_WARN_SECONDS
        self.details.update(oldest_pending_seconds=round(age, 3), warn_after_seconds=warn_after)
        if age > warn_after:
            raise ServiceWarning(f"a notification has been pending for {age:.0f} s")


def components() -> dict[str, HealthCheck]:
    checks: dict[str, HealthCheck] = {"database": DatabaseCheck()}
    checks.update({role: RoleCheck(role=role) for role in ROLES})
    checks["queue"] = QueueCheck()
    checks["executables"] = ExecutablesCheck()
    checks["notifications"] = NotificationsCheck()
    return checks


def run_check(check: HealthCheck) -> HealthCheckResult:
    """Run one check synchronously, in a savepoint, as the library's `get_result` would."""
    start = timeit.default_timer()
    error: HealthCheckException | None = None
    try:
        with transaction.atomic():
            check.run()
    except HealthCheckException as exc:
        error = exc
    except DatabaseError as exc:
        error = ServiceUnavailable(f"database error: {type(exc).__name__}")
    except Exception:
        logger.exception("health check %r failed unexpectedly", check)
        error = HealthCheckException("unknown error")
    return HealthCheckResult(check=check, error=error, time_taken=timeit.default_timer() - start)


def health_report() -> tuple[dict[str, Any], bool]:
    """(JSON body, healthy): healthy unless a critical component is down; warnings pass."""
    report: dict[str, dict[str, Any]] = {}
    healthy, degraded = True, False
    for name, check in components().items():
        if name != "database" and report["database"]["status"] == "down":
            report[name] = {"status": "down", "error": "database unavailable"}
            healthy = False
            continue
        result = run_check(check)
        entry: dict[str, Any] = {"status": "ok", **getattr(check, "details", {})}
        if result.error is not None:
            soft = isinstance(result.error, ServiceWarning) or not check.critical
            entry["status"] = "warning" if soft else "down"
            entry["error"] = result.error.message
            healthy = healthy and soft
            degraded = degraded or soft
        entry["took_ms"] = round(result.time_taken * 1000, 1)
        report[name] = entry
    status = "down" if not healthy else "warning" if degraded else "ok"
    return {"status": status, "components": report}, healthy


# The shapes in the schema (every answer declared with its shape).
HEALTH_STATUSES = ["ok", "warning", "down"]  # HealthStatusEnum (settings ENUM_NAME_OVERRIDES)
COMPONENT = inline_serializer(
    "HealthComponent",
    {
        "status": serializers.ChoiceField(choices=HEALTH_STATUSES),
        "error": serializers.CharField(required=False),
        "took_ms": serializers.FloatField(required=False),
    },
)
HEALTH = inline_serializer(
    "Health",
    {
        "status": serializers.ChoiceField(choices=HEALTH_STATUSES),
        "components": serializers.DictField(child=COMPONENT),
    },
)
LIVE = inline_serializer("Live", {"status": serializers.CharField()})


class HealthView(APIView):
    """200 when every critical component is healthy, else 503; one entry per component."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(
        responses={
            200: OpenApiResponse(HEALTH, description="Healthy (warnings allowed)."),
            503: OpenApiResponse(HEALTH, description="A critical component is down."),
        }
    )
    def get(self, request: Request) -> Response:
        body, healthy = health_report()
        response = Response(body, status=200 if healthy else 503)
        response["Cache-Control"] = "no-store"
        # A 503 here is the answer, not a server error: keep it out of django.request's error
        # log, which probes every few seconds would flood while a component is down.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response


class LiveView(APIView):
    """A bare liveness probe: the process answers; nothing else is checked."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: LIVE})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})
