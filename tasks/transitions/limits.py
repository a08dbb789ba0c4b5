"""Limit keys: the rows tasks name to share a limit, in two kinds, each resolved from a task,
declared, changed and counted by the same functions here. The claim admits under them
(tasks/sql/claim.sql); the reviewer marks the due runs they hold back waiting.

| kind | task field | limits (API: column) | counts | the claim starts a run while |
| --- | --- | --- | --- | --- |
| CONCURRENCY | `concurrency` | `limit`: `max_running` | `running` | < `limit` of its runs run |
| RATE | `rate_limit` | `limit`: `rate_limit`, | `used`, | < `limit` of its runs started |
| | | `per`: `per_seconds` | `next_start_at` | in the last `per` seconds |

Both kinds alike: a task's key is its owner's, or its team's for a team's task (created on first
use, with the task's limits; every member's task naming "db" in the team shares the team's one
key, and a task moved to another team names the key of that name there), or, with scope
"global", one an operator declared. Limits set on the key itself (declared) win over
the tasks'; until then the latest task naming the key sets them. A change applies from the next
claim; a rate key's also recomputes when its window frees, from the log of starts.
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
    set_limits: str  # its statement in limits.sql (the API, the admin, tasks)
    hold: str  # the reviewer's statement in limits.sql: due runs a full key holds back

    @property
    def run_column(self) -> str:
        return f"{self.key_field}_id"


def _runs(column: str, condition: Q) -> Coalesce:
    # Runs carry a key's id without a foreign key (tasks/models.py), hence the subquery.
    runs = Run.objects.filter(condition, **{column: OuterRef("pk")}).order_by().values(column)
    count = runs.annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(count, output_field=IntegerField()), 0)


def _concurrency_counts() -> dict[str, Any]:
    """`running`: the key's runs running now."""
    return {"running": _runs("concurrency_key_id", Q(status=Run.Status.RUNNING))}


def _rate_counts() -> dict[str, Any]:
    """`used`: the key's starts in the last `per_seconds` (at most its limit); `next_start_at`:
    while its window is full, when the next run may start (database clock, as the claim's)."""
    used = """least(tasks_ratekey.rate_limit, (
        SELECT count(*) FROM unnest(tasks_ratekey.starts) AS s(at)
         WHERE s.at > statement_timestamp() - make_interval(secs => tasks_ratekey.per_seconds)))"""
    return {
        "used": RawSQL(used, [], output_field=IntegerField()),
        "next_start_at": Case(When(held_until__gt=Now(), then=F("held_until"))),
    }


CONCURRENCY = Kind(
    noun="concurrency key",
    model=ConcurrencyKey,
    field="concurrency",
    key_field="concurrency_key",
    limits={"limit": "max_running"},
    counts=_concurrency_counts,
    set_limits="set_concurrency_limits",
    hold="hold_keyed",
)
RATE = Kind(
    noun="rate key",
    model=RateKey,
    field="rate_limit",
    key_field="rate_key",
    limits={"limit": "rate_limit", "per": "per_seconds"},
    counts=_rate_counts,
    set_limits="set_rate_limits",
    hold="hold_rate_limited",
)
KINDS = (CONCURRENCY, RATE)


def global_key(kind: Kind, name: str) -> LimitKey | None:
    return kind.model.objects.filter(owner__isnull=True, name=name).first()


def resolve_task_keys(task: Task, data: dict, known: dict | None = None) -> None:
    """Point `task` (its team set from `data` already) at the key of each kind `data`
    (validated) names, creating or changing the owner's or the team's keys on the way: create
    and update call it inside the transaction that saves the task. `known` remembers a batch's
    keys by value and team."""
    for column, key_id in task_keys(task.owner, task.team_id, data, known).items():
        setattr(task, column, key_id)


def task_keys(owner: Any, team_id: int | None, data: dict, known: dict | None = None) -> dict:
    """`resolve_task_keys` for a task not built as an instance (the batch create's rows): the
    key id of each kind `data` names, by the task's column."""
    seen = {} if known is None else known
    found = {}
    for kind in KINDS:
        if kind.field not in data:
            continue
        value = data[kind.field]
        remembered = (kind.field, team_id, *sorted(value.items()))
        if remembered not in seen:
            seen[remembered] = resolve(kind, owner, value, team_id=team_id)
        found[kind.run_column] = seen[remembered]
    return found


def keys_follow_a_move(task: Task, data: dict) -> None:
    """Add to `data` (an update's validated fields) the keys `task` names when `data` moves it
    to another team (or out of one), so that resolve_task_keys names them in its new
    namespace and its runs not started carry them."""
    if "team" not in data:
        return
    for kind in KINDS:
        if kind.field not in data and getattr(task, kind.field):
            data[kind.field] = getattr(task, kind.field)


def resolve(kind: Kind, owner: Any, value: dict, *, team_id: int | None = None) -> int | None:
    """The id of the key `value` (a task's field, validated) names, created or changed in the
    caller's transaction (resolve_task_keys); None for {} (no key). A key of scope "owner" is
    the team's `team_id` when given (made by `owner` if new), else `owner`'s own."""
    if not value:
        return None
    name = value["key"]
    if value.get("scope") == GLOBAL:
        found = global_key(kind, name)
        if found is None:  # validated, but an operator may have just removed it
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
    """Where a key of that scope lives (a global one, `team_id`'s or `owner`'s own) and the
    columns a new one is made with: its limits, and `owner` as who made a team's."""
    columns = {column: limits[limit] for limit, column in kind.limits.items()}
    if scope == GLOBAL:
        return {"owner": None, "team": None}, columns
    if team_id is None:
        return {"owner": owner, "team": None}, columns
    return {"team_id": team_id}, {**columns, "owner": owner}


def visible_keys(kind: Kind, owner: Any) -> QuerySet[Any]:
    """The keys `owner` may see (accounts/access.py) and the global ones, with their runs
    counted (with_counts)."""
    keys = kind.model.objects.filter(access.visible_q(owner) | Q(owner__isnull=True))
    return with_counts(kind, keys).order_by("owner_id", "name", "id")


def with_counts(kind: Kind, keys: QuerySet[Any]) -> QuerySet[Any]:
    """`waiting`: each key's claimable runs due; then the kind's own counts (`Kind.counts`)."""
    due = Q(status__in=CLAIMABLE_STATUSES, execute_at__lte=Now())
    return keys.annotate(waiting=_runs(kind.run_column, due), **kind.counts())


def declare(
    *, kind: Kind, owner: Any, name: str, limits: dict, scope: str, team: Any = None
) -> tuple[Any, bool]:
    """Create (or set the limits of) a key, declared: its limits win over the tasks'. The key
    is `team`'s when one is given (made by `owner` if new), else `owner`'s, or a global one."""
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
    """The audit entry of a key a person declared (the API, the admin)."""
    audit.record(audit.entry("create", kind.key_field, key))


def set_limits(kind: Kind, key: LimitKey, limits: dict, *, declared: bool = True) -> None:
    """New limits on the key (by API name; one not given keeps its value), for the next claim:
    declared from now on, or a task's, which changes a key not declared only (also when the
    two race)."""
    given = {name: limits.get(name, getattr(key, column)) for name, column in kind.limits.items()}
    with transaction.atomic(), connection.cursor() as cursor:
        statement = queries("tasks", "limits.sql")[kind.set_limits]
        cursor.execute(statement, {"id": key.pk, "declared": declared, **given})
        if declared:  # a person's change; a task's is recorded as the task's update
            was = {name: getattr(key, column) for name, column in kind.limits.items()}
            changes = audit.diff({**was, "declared": key.declared}, {**given, "declared": True})
            audit.record(audit.entry("update", kind.key_field, key, changes))


def hold_waiting_runs(kind: Kind, *, batch: int = HOLD_BATCH) -> int:
    """Mark due runs of keys that are full (at their limit, or their window full)
    `waiting_for_resource` with the key's reason (the reviewer, each pass); returns how many
    changed. Workers need no wake-up: a held run is as claimable as before, and the claim
    clears its reason when it starts it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(queries("tasks", "limits.sql")[kind.hold], {"batch": batch})
        return len(cursor.fetchall())
