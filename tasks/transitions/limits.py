"""Limit keys: rows tasks name to share a limit, in two kinds (`KINDS`; tasks/admission/ states
each kind's rule), resolved from a task, declared, changed and counted by the functions here.

A task's key is its owner's, or its team's for a team's task (created on first use with the
task's limits; every member's task naming "db" in the team shares the team's one key, and a task
moved to another team names the key of that name there), or, with scope "global", one an
operator declared. Limits set on the key itself (declared: the API, the admin) win over the
tasks'; until then the latest task naming the key sets them. A change applies from the next
claim; a rate key's also recomputes when its window frees, from its log of starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Now

from accounts import access
from scheduler_project.sql import queries
from tasks import audit
from tasks.models import CLAIMABLE_STATUSES, ConcurrencyKey, LimitKey, RateKey, Run, Task

GLOBAL = "global"
HOLD_BATCH = 500


@dataclass(frozen=True)
class Kind:
    noun: str  # in messages: "no global concurrency key 'db'"
    model: type[ConcurrencyKey | RateKey]
    field: str  # the task's field as written: {"key", "limit", ..., "scope"}, {} for none
    key_field: str  # the task's key row; each run carries its id in a column of that name
    limits: dict[str, str]  # the limits' API names -> the key's columns
    counts: Callable[[], dict[str, Any]]  # the kind's own counts, for the API and the admin
    hold: str  # the reviewer's statement in limits.sql: due runs a full key holds back

    @property
    def run_column(self) -> str:
        return f"{self.key_field}_id"


def _runs(column: str, condition: Q) -> Coalesce:
    # Runs carry a key's id without a foreign key (tasks/models.py), hence the subquery.
    runs = Run.objects.filter(condition, **{column: OuterRef("pk")}).order_by().values(column)
    count = runs.annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(count, output_field=IntegerField()), 0)


# A rate key's starts in its window (at most its limit; database clock, as the claim's).
USED = """least(tasks_ratekey.rate_limit, (SELECT count(*) FROM unnest(tasks_ratekey.starts) AS
    s(at) WHERE s.at > statement_timestamp() - make_interval(secs => tasks_ratekey.per_seconds)))"""
CONCURRENCY = Kind(
    noun="concurrency key",
    model=ConcurrencyKey,
    field="concurrency",
    key_field="concurrency_key",
    limits={"limit": "max_running"},
    counts=lambda: {"running": _runs("concurrency_key_id", Q(status=Run.Status.RUNNING))},
    hold="hold_keyed",
)
RATE = Kind(
    noun="rate key",
    model=RateKey,
    field="rate_limit",
    key_field="rate_key",
    limits={"limit": "rate_limit", "per": "per_seconds"},
    counts=lambda: {
        "used": RawSQL(USED, [], output_field=IntegerField()),
        "next_start_at": Case(When(held_until__gt=Now(), then=F("held_until"))),
    },
    hold="hold_rate_limited",
)
KINDS = (CONCURRENCY, RATE)


def global_key(kind: Kind, name: str) -> LimitKey | None:
    return kind.model.objects.filter(owner__isnull=True, name=name).first()


def resolve_task_keys(task: Task, data: dict, known: dict | None = None) -> None:
    """Point `task` (its team set from `data`) at the key of each kind `data` names (resolve),
    inside the create's or update's transaction; `known` remembers a batch's keys."""
    for column, key_id in task_keys(task.owner, task.team_id, data, known).items():
        setattr(task, column, key_id)


def task_keys(owner: Any, team_id: int | None, data: dict, known: dict | None = None) -> dict:
    """`resolve_task_keys` for a task not built as an instance: key ids by the run's column."""
    seen = {} if known is None else known
    found = {}
    for kind in KINDS:
        if kind.field in data:
            remembered = (kind.field, team_id, *sorted(data[kind.field].items()))
            if remembered not in seen:
                seen[remembered] = resolve(kind, owner, data[kind.field], team_id=team_id)
            found[kind.run_column] = seen[remembered]
    return found


def keys_follow_a_move(task: Task, data: dict) -> None:
    """Add to an update's `data` that moves `task` to another team (or out of one) the keys it
    names, so that they resolve in its new namespace and its runs not started carry them."""
    for kind in KINDS if "team" in data else ():
        if kind.field not in data and getattr(task, kind.field):
            data[kind.field] = getattr(task, kind.field)


def resolve(kind: Kind, owner: Any, value: dict, *, team_id: int | None = None) -> int | None:
    """The id of the key a task's `value` (validated) names, created or changed; None for {}."""
    if not value:
        return None
    name = value["key"]
    if value.get("scope") == GLOBAL:
        if (found := global_key(kind, name)) is None:  # an operator may have just removed it
            raise ValueError(f"no global {kind.noun} {name!r}")
        return found.pk
    lookup, columns = _namespace(kind, owner, value, team_id=team_id)
    key, created = kind.model.objects.get_or_create(**lookup, name=name, defaults=columns)
    changed = any(getattr(key, column) != v for column, v in columns.items())
    if not created and not key.declared and changed:
        set_limits(kind, key, value, declared=False)
    return key.pk


def _namespace(
    kind: Kind, owner: Any, limits: dict, *, team_id: int | None, scope: str = "owner"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Where a key lives (global, `team_id`'s or `owner`'s own) and a new one's columns."""
    columns = {column: limits[limit] for limit, column in kind.limits.items()}
    if scope == GLOBAL:
        return {"owner": None, "team": None}, columns
    if team_id is None:
        return {"owner": owner, "team": None}, columns
    return {"team_id": team_id}, {**columns, "owner": owner}


def visible_keys(kind: Kind, owner: Any) -> QuerySet[Any]:
    """The keys `owner` may see (accounts/access.py) and the global ones, counted."""
    keys = kind.model.objects.filter(access.visible_q(owner) | Q(owner__isnull=True))
    return with_counts(kind, keys).order_by("owner_id", "name", "id")


def with_counts(kind: Kind, keys: QuerySet[Any]) -> QuerySet[Any]:
    """`waiting`: each key's claimable runs due; then the kind's own counts."""
    due = Q(status__in=CLAIMABLE_STATUSES, execute_at__lte=Now())
    return keys.annotate(waiting=_runs(kind.run_column, due), **kind.counts())


def declare(
    *, kind: Kind, owner: Any, name: str, limits: dict, scope: str, team: Any = None
) -> tuple[Any, bool]:
    """Create a declared key (`team`'s, made by `owner`, when given), or set its limits."""
    team_id = None if team is None else team.pk
    lookup, columns = _namespace(kind, owner, limits, team_id=team_id, scope=scope)
    with transaction.atomic():
        key, created = kind.model.objects.get_or_create(
            **lookup, name=name, defaults={**columns, "declared": True}
        )
        if created:
            record_created(kind, key)
        else:
            set_limits(kind, key, limits)
    return key, created


def record_created(kind: Kind, key: LimitKey) -> None:
    audit.record(audit.entry("create", kind.key_field, key))


def set_limits(kind: Kind, key: LimitKey, limits: dict, *, declared: bool = True) -> None:
    """New limits on the key (by API name; one not given keeps its value): declared from now
    on, or a task's (limits.sql, `set_limits`); only a person's change is audited here."""
    given = {name: limits.get(name, getattr(key, column)) for name, column in kind.limits.items()}
    with transaction.atomic(), connection.cursor() as cursor:
        statement = queries("tasks", "limits.sql")[f"set_{kind.key_field}_limits"]
        cursor.execute(statement, {"id": key.pk, "declared": declared, **given})
        if declared:
            was = {name: getattr(key, column) for name, column in kind.limits.items()}
            changes = audit.diff({**was, "declared": key.declared}, {**given, "declared": True})
            audit.record(audit.entry("update", kind.key_field, key, changes))


def hold_waiting_runs(kind: Kind, *, batch: int = HOLD_BATCH) -> int:
    """Mark the due runs of full keys waiting with the key's reason (the reviewer); how many."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(queries("tasks", "limits.sql")[kind.hold], {"batch": batch})
        return len(cursor.fetchall())
