"""Rate limits: the key rows tasks name and the claim locks and logs starts on
(tasks/sql/claim.sql, `rate_ctes`).

A task's `rate_limit` names a rate key of its owner (created on first use, with the task's limit
and window) or, with scope "global", a key an operator declared. A limit set on the key itself
(declared) wins over the tasks'; until then the latest task to name the key sets it.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import (
    Count,
    DateTimeField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Now

from scheduler_project.sql import queries
from tasks.models import CLAIMABLE_STATUSES, RateKey, Run

SQL = queries("tasks", "rate_limits.sql")
GLOBAL = "global"
HOLD_BATCH = 500


def global_key(name: str) -> RateKey | None:
    return RateKey.objects.filter(owner__isnull=True, name=name).first()


def resolve(owner: Any, rate_limit: dict) -> int | None:
    """The id of the key `rate_limit` (validated) names; None for {} (no key)."""
    if not rate_limit:
        return None
    name = rate_limit["key"]
    if rate_limit.get("scope") == GLOBAL:
        found = global_key(name)
        if found is None:  # validated, but an operator may have just removed it
            raise ValueError(f"no global rate key {name!r}")
        return found.pk
    limit, per = rate_limit["limit"], rate_limit["per"]
    with transaction.atomic():
        key, created = RateKey.objects.get_or_create(
            owner=owner, name=name, defaults={"rate_limit": limit, "per_seconds": per}
        )
        if not created and not key.declared and (key.rate_limit, key.per_seconds) != (limit, per):
            set_rate(key, limit, per, declared=False)
    return key.pk


def visible_keys(owner: Any) -> QuerySet[RateKey]:
    """The owner's keys and the global ones, with their runs counted (with_counts)."""
    keys = RateKey.objects.filter(Q(owner=owner) | Q(owner__isnull=True))
    return with_counts(keys).order_by("owner_id", "name", "id")


def with_counts(keys: QuerySet[RateKey]) -> QuerySet[RateKey]:
    """`waiting`: the key's claimable runs due; `used`: its starts in the last `per_seconds`
    (at most its limit); `next_start_at`: while its window is full, when the next run may
    start (database clock, as the claim reads it)."""
    runs = (
        Run.objects.filter(
            status__in=CLAIMABLE_STATUSES, execute_at__lte=Now(), rate_key_id=OuterRef("pk")
        )
        .order_by()
        .values("rate_key_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    return keys.annotate(
        waiting=Coalesce(Subquery(runs, output_field=IntegerField()), 0),
        used=RawSQL(_USED, [], output_field=IntegerField()),
        next_start_at=RawSQL(_NEXT_START, [], output_field=DateTimeField()),
    )


_USED = """least(tasks_ratekey.rate_limit, (
    SELECT count(*) FROM unnest(tasks_ratekey.starts) AS s(at)
     WHERE s.at > statement_timestamp() - make_interval(secs => tasks_ratekey.per_seconds)))"""
_NEXT_START = """CASE WHEN tasks_ratekey.held_until > statement_timestamp()
                      THEN tasks_ratekey.held_until END"""


def declare(*, owner: Any, name: str, limit: int, per: int, scope: str) -> tuple[RateKey, bool]:
    """Create (or set the limit of) a key, declared: its limit wins over the tasks'."""
    key, created = RateKey.objects.get_or_create(
        owner=None if scope == GLOBAL else owner,
        name=name,
        defaults={"rate_limit": limit, "per_seconds": per, "declared": True},
    )
    if not created:
        set_rate(key, limit, per)
    return key, created


def set_rate(key: RateKey, limit: int, per: int, *, declared: bool = True) -> None:
    """A new limit and window on the key (declared from now on, unless a task's limit is
    followed); the next claim applies them."""
    with connection.cursor() as cursor:
        params = {"id": key.pk, "limit": limit, "per": per, "declared": declared}
        cursor.execute(SQL["set_rate"], params)


def hold_rate_limited_runs(*, batch: int = HOLD_BATCH) -> int:
    """Mark due runs of rate keys whose window is full `waiting_for_resource` with the key's
    reason (the reviewer, each pass); returns how many changed. The claim clears the reason
    when it starts them."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["hold_rate_limited"], {"batch": batch})
        return len(cursor.fetchall())
