"""Concurrency keys: the rows tasks name and the claim locks and counts (tasks/sql/claim.sql).

A task's `concurrency` names a key of its owner (created on first use, with the task's limit)
or, with scope "global", a key an operator declared. A limit set on the key itself (declared)
wins over the tasks'; until then the latest task to name the key sets its limit.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Now

from scheduler_project.sql import queries
from tasks.models import CLAIMABLE_STATUSES, ConcurrencyKey, Run

SQL = queries("tasks", "concurrency.sql")
GLOBAL = "global"
HOLD_BATCH = 500


def global_key(name: str) -> ConcurrencyKey | None:
    return ConcurrencyKey.objects.filter(owner__isnull=True, name=name).first()


def resolve(owner: Any, concurrency: dict) -> int | None:
    """The id of the key `concurrency` (validated) names; None for {} (no key)."""
    if not concurrency:
        return None
    name = concurrency["key"]
    if concurrency.get("scope") == GLOBAL:
        found = global_key(name)
        if found is None:  # validated, but an operator may have just removed it
            raise ValueError(f"no global concurrency key {name!r}")
        return found.pk
    limit = concurrency["limit"]
    with transaction.atomic():
        key, created = ConcurrencyKey.objects.get_or_create(
            owner=owner, name=name, defaults={"max_running": limit}
        )
        if not created and not key.declared and key.max_running != limit:
            ConcurrencyKey.objects.filter(pk=key.pk, declared=False).update(max_running=limit)
    return key.pk


def visible_keys(owner: Any) -> QuerySet[ConcurrencyKey]:
    """The owner's keys and the global ones, with their runs counted (with_counts)."""
    keys = ConcurrencyKey.objects.filter(Q(owner=owner) | Q(owner__isnull=True))
    return with_counts(keys).order_by("owner_id", "name", "id")


def with_counts(keys: QuerySet[ConcurrencyKey]) -> QuerySet[ConcurrencyKey]:
    """`running`: the key's runs running; `waiting`: its claimable runs due."""
    return keys.annotate(
        running=_count(Q(status=Run.Status.RUNNING)),
        waiting=_count(Q(status__in=CLAIMABLE_STATUSES, execute_at__lte=Now())),
    )


def _count(condition: Q) -> Coalesce:
    # Runs carry the key's id without a foreign key (tasks/models.py), hence the subquery.
    runs = (
        Run.objects.filter(condition, concurrency_key_id=OuterRef("pk"))
        .order_by()
        .values("concurrency_key_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    return Coalesce(Subquery(runs, output_field=IntegerField()), 0)


def declare(*, owner: Any, name: str, limit: int, scope: str) -> tuple[ConcurrencyKey, bool]:
    """Create (or set the limit of) a key, declared: its limit wins over the tasks'."""
    key, created = ConcurrencyKey.objects.update_or_create(
        owner=None if scope == GLOBAL else owner,
        name=name,
        defaults={"max_running": limit, "declared": True},
    )
    return key, created


def set_limit(key: ConcurrencyKey, limit: int) -> ConcurrencyKey:
    """A new limit on the key (declared from now on); the next claim applies it."""
    ConcurrencyKey.objects.filter(pk=key.pk).update(max_running=limit, declared=True)
    key.refresh_from_db()
    return key


def hold_keyed_runs(*, batch: int = HOLD_BATCH) -> int:
    """Mark due runs of keys at their limit `waiting_for_resource` with the key's reason (the
    reviewer, each pass); returns how many changed. Workers need no wake-up: a held run is as
    claimable as before, and the claim clears its reason when it starts it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["hold_keyed"], {"batch": batch})
        return len(cursor.fetchall())
