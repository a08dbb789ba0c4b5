"""Task (what a user defined), Run (one occurrence: the queue and the history), Attempt, Process."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from tasks import resources as quantities
from tasks.admission import WAIT_KINDS
from tasks.audit_log import AuditEntry  # noqa: F401 (a model of this app)
from tasks.events import SKIP_KINDS
from tasks.ids import idempotency_key, uuid7
from tasks.storage import ExecutableField

RUN_STATUSES = (
    "scheduled",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "skipped",
    "waiting_for_resource",
)
TERMINAL_STATUSES = ("succeeded", "failed", "cancelled", "skipped")
CLAIMABLE_STATUSES = ("scheduled", "waiting_for_resource")


# A task that has ended: nothing left to plan or to run (tasks/sql/complete.sql).
ENDED = ("completed", "failed")


# A task's retry policy when its request sets none, read from settings each time a row is built
# (not frozen into the migration), so a deployment changes it without a schema change.
def default_max_attempts() -> int:
    return settings.TASKS_DEFAULT_MAX_ATTEMPTS


def default_backoff_base() -> float:
    return settings.TASKS_DEFAULT_BACKOFF_BASE_SECONDS


def default_backoff_cap() -> float:
    return settings.TASKS_DEFAULT_BACKOFF_CAP_SECONDS


class LimitKey(models.Model):
    """A key the tasks naming it share a limit under (tasks/transitions/limits.py): an owner's, a
    team's (`owner` made it) or, with no owner, a global one an operator declared."""

    id = models.BigAutoField(primary_key=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    team = models.ForeignKey(
        "accounts.Team", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    name = models.CharField(max_length=200)
    declared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.name if self.owner_id is None else f"{self.owner_id}:{self.name}"


def key_constraints(prefix: str, **minimums: str) -> list[models.BaseConstraint]:
    """A key's name is unique among its owner's own keys, its team's and the global ones; each
    limit is at least 1 (`minimums`: column -> the constraint's suffix)."""
    unique = {
        "owner_name": (["owner", "name"], Q(owner__isnull=False, team__isnull=True)),
        "team_name": (["team", "name"], Q(team__isnull=False)),
        "global": (["name"], Q(owner__isnull=True)),
    }
    return [
        *[
            models.UniqueConstraint(fields=f, condition=c, name=f"{prefix}_unique_{n}")
            for n, (f, c) in unique.items()
        ],
        *[
            models.CheckConstraint(condition=Q(**{f"{column}__gte": 1}), name=f"{prefix}_{suffix}")
            for column, suffix in minimums.items()
        ],
    ]


class ConcurrencyKey(LimitKey):
    """At most `max_running` runs of the tasks naming it are `running` at once."""

    max_running = models.PositiveIntegerField()
    # Runs ever admitted under this key: only claims change it, under the row's lock.
    admitted = models.BigIntegerField(default=0)

    class Meta:
        constraints = key_constraints("concurrency_key", max_running="max_running_min")


class RateKey(LimitKey):
    """At most `rate_limit` runs of the tasks naming it start in any `per_seconds`: the claim
    keeps `starts`, the last `rate_limit` start times (ascending), and `held_until`, when the
    next may start while the log is full (tasks/sql/claim.sql, `rate_ctes`)."""

    rate_limit = models.PositiveIntegerField()
    per_seconds = models.PositiveIntegerField()
    starts = ArrayField(models.DateTimeField(), default=list, blank=True)
    held_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = key_constraints("rate_key", rate_limit="limit_min", per_seconds="per_min")
        indexes = [
            # The claim's keys whose window is full now: one probe of an empty range when none is.
            models.Index(
                fields=["held_until"],
                condition=Q(held_until__isnull=False),
                name="rate_key_held_idx",
            ),
        ]


# The attributes of a task that a new run of it copies (Task.requests).
REQUEST_FIELDS = ("cpu_millis", "memory_bytes", "concurrency_key_id", "rate_key_id")


def requested(resources: dict | None) -> tuple[int, int]:
    """A task's `cpu_millis` and `memory_bytes` from its `resources` (validated: no error here)."""
    cpu, memory = (resources or {}).get("cpu"), (resources or {}).get("memory")
    return (
        quantities.cpu_millis(str(cpu)) if cpu is not None else 0,
        quantities.memory_bytes(str(memory)) if memory is not None else 0,
    )


class Task(models.Model):
    class Kind(models.TextChoices):
        HTTP = "http"
        EXECUTABLE = "executable"
        HANDLER = "handler"

    class Status(models.TextChoices):
        ACTIVE = "active"
        PAUSED = "paused"
        COMPLETED = "completed"
        # Ended like `completed`, but its latest run that ran ended `failed` (dead-lettered).
        FAILED = "failed"
        CANCELLED = "cancelled"

    class OnZombie(models.TextChoices):
        NOTIFY = "notify"
        CANCEL = "cancel"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # Not indexed alone: task_owner_created_id_idx leads with it, and every index of a task is
    # written at each of its planning steps and at its end (migration 0049).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    team = models.ForeignKey(
        "accounts.Team",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # task_team_created_id_idx leads with it
    )
    name = models.CharField(max_length=200, blank=True, default="")
    # NULL, not "": the partial unique index must ignore tasks without a key. A cancelled
    # (deleted) task keeps its key for the record but no longer holds it (ACTIVE_DEDUP).
    dedup_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    kind = models.CharField(max_length=16, choices=Kind.choices)
    payload = models.JSONField(default=dict, blank=True)
    # Keyed by content hash in the default storage (local or S3): tasks/storage.py.
    executable = ExecutableField(null=True, blank=True)
    # The executable's file name as uploaded, for display (its key is the content hash); a
    # database default too, for rows written in SQL.
    executable_name = models.CharField(max_length=255, blank=True, default="", db_default="")
    schedule = models.JSONField(default=dict)
    schedule_type = models.CharField(max_length=16, default="once")
    priority = models.SmallIntegerField(default=5)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    max_attempts = models.PositiveIntegerField(default=default_max_attempts)
    retry_backoff_base = models.FloatField(default=default_backoff_base)
    retry_backoff_cap = models.FloatField(default=default_backoff_cap)
    timeout = models.FloatField(null=True, blank=True)
    notify = models.JSONField(default=list, blank=True)
    # {"cpu": "500m", "memory": "256Mi"}: Kubernetes quantities as written (tasks/resources.py);
    # a database default too, for the statements that insert tasks in SQL.
    resources = models.JSONField(default=dict, db_default={}, blank=True)
    # What the task's runs are expected to do (tasks/expectations.py): `start_within`,
    # `duration` {min, max}, `failure_streak`, `success_within`, `repeat_every`; {} expects
    # nothing. Its numbers are copied onto the task's TaskHealth row, which the checks read.
    expect = models.JSONField(default=dict, db_default={}, blank=True)
    # `resources` as numbers (set_requests), copied onto each run: the claim compares them.
    cpu_millis = models.BigIntegerField(default=0, db_default=0)
    memory_bytes = models.BigIntegerField(default=0, db_default=0)
    # {"key": "db", "limit": 2, "scope": "owner"} as written, {} for none; `concurrency_key` is
    # the key row it names, copied onto each run (as the requests are) for the claim.
    concurrency = models.JSONField(default=dict, db_default={}, blank=True)
    concurrency_key = models.ForeignKey(
        ConcurrencyKey,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # task_concurrency_key_idx: tasks with a key only
    )
    # {"key": "crm-api", "limit": 10, "per": 60, "scope": "owner"} as written, {} for none;
    # `rate_key` is the key row it names, copied onto each run as `concurrency_key` is.
    rate_limit = models.JSONField(default=dict, db_default={}, blank=True)
    rate_key = models.ForeignKey(
        RateKey,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # task_rate_key_idx: tasks with a key only
    )
    # What a worker does with a run flagged zombie (no CPU, no output): always notify; cancel too?
    on_zombie = models.CharField(
        max_length=8, choices=OnZombie.choices, default=OnZombie.NOTIFY, db_default="notify"
    )
    # The planner's cursor: the next nominal occurrence not yet materialised as a Run; NULL when
    # none remain. Not the task's next run (the API's `next_run_at` is its `next_runs[0]`).
    next_unplanned_at = models.DateTimeField(null=True, blank=True)
    runs_planned = models.PositiveIntegerField(default=0)
    # The task's last pause: occurrences whose time fell from paused_at until resumed_at are
    # recorded skipped when it is resumed (tasks/occurrences.py), instead of all running at once.
    paused_at = models.DateTimeField(null=True, blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True)
    # The task set that declares this task (tasks/tasksets.py), and its key there: a task is in
    # at most one set. `taskset_entry` holds what the last apply declared and what it left
    # (`{"entry", "applied", "ignore_changes"}`): drift is the task's fields against `applied`.
    taskset = models.ForeignKey(
        "TaskSet",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
        db_index=False,  # task_taskset_idx: tasks in a set only
    )
    taskset_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    taskset_entry = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Set with the task's JSON (tasks/api/json_sql.py) for occurrences.next_runs; not a field.
    pending_times: list[datetime] | None = None

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "dedup_key"],
                condition=Q(dedup_key__isnull=False) & ~Q(status="cancelled"),
                name="task_unique_owner_dedup_key",
            ),
            # A key names one task of its set; a deleted (cancelled) task frees it.
            models.UniqueConstraint(
                fields=["taskset", "taskset_key"],
                condition=Q(taskset__isnull=False) & ~Q(status="cancelled"),
                name="task_unique_taskset_key",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=0, priority__lte=9), name="task_priority_range"
            ),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="task_max_attempts_min"),
            models.CheckConstraint(
                condition=Q(kind__in=["http", "executable", "handler"]), name="task_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "paused", "completed", "failed", "cancelled"]),
                name="task_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(on_zombie__in=["notify", "cancel"]), name="task_on_zombie_valid"
            ),
        ]
        indexes = [
            # The scheduler's claim: active tasks whose next occurrence is inside the look-ahead.
            models.Index(
                fields=["next_unplanned_at"],
                condition=Q(status="active", next_unplanned_at__isnull=False),
                name="task_due_idx",
            ),
            # A user's tasks newest first, in the list's whole order (the id last: tasks
            # created together tie on created_at), team_id for the own tasks' part and count
            # (migration 0046).
            models.Index(
                fields=["owner", "-created_at", "id"],
                include=["team"],
                name="task_owner_created_id_idx",
            ),
            # A team's tasks newest first: one part of a member's list (access.visible_page).
            # Partial, as the three below: a task written (every planning step and its end
            # write a new version of its row, never a HOT update) adds an entry to each index
            # whose condition it meets, and most tasks have no team, key or set (migration 0049).
            models.Index(
                fields=["team", "-created_at", "id"],
                condition=Q(team__isnull=False),
                name="task_team_created_id_idx",
            ),
            models.Index(
                fields=["concurrency_key"],
                condition=Q(concurrency_key__isnull=False),
                name="task_concurrency_key_idx",
            ),
            models.Index(
                fields=["rate_key"], condition=Q(rate_key__isnull=False), name="task_rate_key_idx"
            ),
            models.Index(
                fields=["taskset"], condition=Q(taskset__isnull=False), name="task_taskset_idx"
            ),
            # The task list's status filter for the few tasks not active (paused, completed,
            # failed, cancelled): active tasks, which the scheduler updates, have no entry
            # (migration 0041).
            models.Index(
                fields=["status"], condition=~Q(status="active"), name="task_not_active_idx"
            ),
        ]

    def __str__(self) -> str:
        return self.name or str(self.id)

    def set_requests(self) -> None:
        """`cpu_millis` and `memory_bytes` from `resources` (validated: no error here)."""
        self.cpu_millis, self.memory_bytes = requested(self.resources)

    @property
    def requests(self) -> dict[str, int | None]:
        """What a new run of this task requests (Run's fields of the same names)."""
        return {name: getattr(self, name) for name in REQUEST_FIELDS}


HEALTHS = ("up", "late", "failing", "overdue")


class TaskHealth(models.Model):
    """A task's up/down state against its `expect`, for tasks that expect anything.

    A table of its own, not columns of Task: the worker's outcome statement updates it in the
    same statement that may complete the task (tasks/sql/claim.sql), and one statement must not
    update one row twice. The expectation's numbers are columns here so that the reviewer's
    checks are index-backed (tasks/sql/expect.sql); `expect` on the task is what the API shows.
    """

    class Health(models.TextChoices):
        UP = "up"
        LATE = "late"
        FAILING = "failing"
        OVERDUE = "overdue"

    task = models.OneToOneField(
        Task, on_delete=models.CASCADE, primary_key=True, related_name="health_state"
    )
    health = models.CharField(max_length=8, choices=Health.choices, default=Health.UP)
    start_within = models.FloatField(null=True, blank=True)
    min_duration = models.FloatField(null=True, blank=True)
    max_duration = models.FloatField(null=True, blank=True)
    failure_streak = models.PositiveIntegerField(null=True, blank=True)
    success_within = models.FloatField(null=True, blank=True)
    repeat_every = models.FloatField(null=True, blank=True)
    # Consecutive final failures since the last success.
    failures = models.PositiveIntegerField(default=0)
    # The last success, or when the expectation was set: `success_within` counts from it.
    succeeded_at = models.DateTimeField()
    # When `health` last changed, and when its last alert (or reminder) was queued.
    changed_at = models.DateTimeField()
    alerted_at = models.DateTimeField(null=True, blank=True)
    # The reviewer's cursors: runs scheduled (late) or started (too slow) up to these instants
    # were checked, so each pass reads only what became due since the last one.
    late_through = models.DateTimeField()
    slow_through = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(health__in=HEALTHS), name="task_health_valid"),
        ]
        indexes = [
            models.Index(
                fields=["late_through"],
                condition=Q(start_within__isnull=False),
                name="task_health_late_idx",
            ),
            models.Index(
                fields=["slow_through"],
                condition=Q(max_duration__isnull=False),
                name="task_health_slow_idx",
            ),
            models.Index(
                fields=["succeeded_at"],
                condition=Q(success_within__isnull=False),
                name="task_health_overdue_idx",
            ),
            models.Index(fields=["health"], name="task_health_health_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.health}"


class TaskSet(models.Model):
    """A user's named set of tasks, declared whole (PUT /api/v1/tasksets/{name}). Its row is
    the lock that serialises applies of the set; `version` counts them."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(
        "accounts.Team", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=0)
    # {key: id} of the workflows the last apply left: drift names one deleted outside the set
    # (a workflow's row goes with it; a task's stays, cancelled).
    workflow_keys = models.JSONField(default=dict, blank=True, db_default={})
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=Q(team__isnull=True),
                name="taskset_unique_owner_name",
            ),
            # A team's set is the team's, whoever applied it first.
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=Q(team__isnull=False),
                name="taskset_unique_team_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


def claimable_by_key(column: str, name: str) -> models.Index:
    """A key's claimable runs in the claim's order (strict priority within a key)."""
    condition = Q(status__in=CLAIMABLE_STATUSES, **{f"{column}__isnull": False})
    return models.Index(
        column, models.F("priority").desc(), "execute_at", "id", condition=condition, name=name
    )


class Run(models.Model):
    class Status(models.TextChoices):
        SCHEDULED = "scheduled"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"
        WAITING_FOR_RESOURCE = "waiting_for_resource"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No single-column indexes on these two: (task, scheduled_at) and (owner, -scheduled_at)
    # below serve every lookup by task or owner, and each index costs an entry on every update
    # of a run (status changes, so no update is HOT).
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="runs", db_index=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    scheduled_at = models.DateTimeField()
    execute_at = models.DateTimeField()
    priority = models.SmallIntegerField(default=5)
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.SCHEDULED)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=default_max_attempts)
    worker = models.CharField(max_length=200, blank=True, default="")
    # A recurring occurrence whose first attempt has not started by this instant (execute_at +
    # the task's misfire grace) is missed: the claim applies the misfire policy to it
    # (tasks/sql/claim.sql). NULL for one-time tasks and run-now runs, which run however late.
    missed_after = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    http_status = models.IntegerField(null=True, blank=True)
    output = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    # Why a `skipped` run was skipped (events.SKIP_KINDS; "" for any other run): the error's
    # words are for people, this is what counters and messages read.
    skip_kind = models.CharField(max_length=16, blank=True, default="", db_default="")
    # Set while (or since) the running payload used no CPU and wrote nothing for
    # TASKS_ZOMBIE_AFTER_SECONDS: when it went quiet. Cleared when it stirs or is claimed again.
    zombie_since = models.DateTimeField(null=True, blank=True)
    # The task's requests when the run was planned (or its resources last changed).
    cpu_millis = models.BigIntegerField(default=0, db_default=0)
    memory_bytes = models.BigIntegerField(default=0, db_default=0)
    # The task's concurrency key (its id; no foreign key, so that a run's writes check nothing).
    concurrency_key_id = models.BigIntegerField(null=True, blank=True)
    # The task's rate key (its id, no foreign key either).
    rate_key_id = models.BigIntegerField(null=True, blank=True)
    # Why a `waiting_for_resource` run waits: the reason's kind (tasks/admission/, which
    # statements choose runs by) and the words built from it for people ("": not waiting).
    wait_kind = models.CharField(max_length=24, blank=True, default="", db_default="")
    wait_reason = models.TextField(blank=True, default="", db_default="")
    # Made by a backfill (POST /tasks/{id}/backfill): an occurrence from before planning began,
    # run on request. Never missed (missed_after NULL), never the planner's to withdraw or count.
    backfill = models.BooleanField(default=False, db_default=False)
    # A finished run as a task's `runs` shows it (JSON text), written by the database when the
    # run finishes (tasks/sql/run_summary.sql); NULL until then. Read by the task list page.
    summary = models.TextField(null=True, blank=True, editable=False)  # noqa: DJ001 (NULL: none)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Materialising an occurrence is idempotent: two schedulers never create it twice.
            models.UniqueConstraint(
                fields=["task", "scheduled_at"], name="run_unique_task_scheduled_at"
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=0, priority__lte=9), name="run_priority_range"
            ),
            models.CheckConstraint(condition=Q(status__in=RUN_STATUSES), name="run_status_valid"),
            models.CheckConstraint(
                condition=Q(wait_kind__in=WAIT_KINDS), name="run_wait_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(skip_kind__in=("", *SKIP_KINDS)), name="run_skip_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=False) | ~Q(status__in=TERMINAL_STATUSES),
                name="run_terminal_has_finished_at",
            ),
            models.CheckConstraint(
                condition=~Q(status="running")
                | Q(started_at__isnull=False, heartbeat_at__isnull=False) & ~Q(worker=""),
                name="run_running_has_worker",
            ),
        ]
        indexes = [
            # The workers' claim over claimable rows only, so it stays as fast with a billion
            # finished runs as with none: one range scan per priority (tasks/sql/claim.sql), which
            # also finds the earliest claimable run. The only index on claimable runs, so that
            # the planner has no other way to claim (a time-ordered one let it sort every due run).
            models.Index(
                models.F("priority").desc(),
                "execute_at",
                condition=Q(status__in=CLAIMABLE_STATUSES),
                name="run_claimable_idx",
            ),
            # The reviewer's rescue scan, the heartbeat renewal and per-owner running counts.
            models.Index(fields=["worker"], condition=Q(status="running"), name="run_running_idx"),
            models.Index(fields=["owner", "-scheduled_at"], name="run_owner_scheduled_idx"),
            # Finished runs by status, newest or oldest first: the run list filtered by a final
            # status, the dashboard's finishes, /metrics' lateness, the reviewer's samples and
            # retention; each asks for a final status, which implies the condition. Finished
            # runs only, so that no claim can read it (the claim's is run_claimable_idx) and a
            # run gets its entry when it finishes, not when planned or claimed (migration 0048).
            models.Index(
                fields=["status", "finished_at"],
                condition=Q(status__in=TERMINAL_STATUSES),
                name="run_finished_idx",
            ),
            # The tasks whose last run may have failed: the console's last-run filter looks for
            # a task's last run only where this finds a failed run (migration 0045).
            models.Index(fields=["task"], condition=Q(status="failed"), name="run_failed_task_idx"),
            # The admin's date filter and its newest-first order.
            models.Index(fields=["scheduled_at"], name="run_scheduled_at_idx"),
            # Runs by when they started: the run list's started_at range (each dashboard bar
            # links to one), a user's dashboard's starts and the timeline. Begun runs only: a
            # run gets its entry when claimed, not when planned (migration 0039).
            models.Index(
                fields=["started_at"],
                condition=Q(started_at__isnull=False),
                name="run_started_at_idx",
            ),
            # The reviewer's search for runs no live worker can hold: claimable runs with
            # requests only. The claim cannot use it (its condition is not the claim's).
            models.Index(
                fields=["execute_at"],
                condition=Q(status__in=CLAIMABLE_STATUSES)
                & (Q(cpu_millis__gt=0) | Q(memory_bytes__gt=0)),
                name="run_requests_idx",
            ),
            # Keyed runs only: the claim's running count per key; each kind's claimable runs (a
            # candidate's rank within its key; whether a full rate key has due runs: the wake-up).
            models.Index(
                fields=["concurrency_key_id"],
                condition=Q(status="running", concurrency_key_id__isnull=False),
                name="run_key_running_idx",
            ),
            claimable_by_key("concurrency_key_id", "run_key_claimable_idx"),
            claimable_by_key("rate_key_id", "run_rate_claimable_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.scheduled_at.isoformat()}"

    @property
    def zombie(self) -> bool:
        return self.zombie_since is not None

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.task_id, self.scheduled_at)


class Attempt(models.Model):
    """One execution attempt of a run; (run, number) is unique, so an outcome is recorded once."""

    class Outcome(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"
        RESCUED = "rescued"
        RELEASED = "released"

    id = models.BigAutoField(primary_key=True)
    # UNIQUE (run, number) serves lookups by run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveIntegerField()
    worker = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.TextField(blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    http_status = models.IntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="attempt_unique_run_number"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.number} {self.outcome}"


class Process(models.Model):
    """A live scheduler, worker or reviewer process, seen through its heartbeat."""

    class Role(models.TextChoices):
        SCHEDULER = "scheduler"
        WORKER = "worker"
        REVIEWER = "reviewer"

    name = models.CharField(max_length=200, primary_key=True)
    role = models.CharField(max_length=16, choices=Role.choices)
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    concurrency = models.PositiveIntegerField(default=0)
    # A worker's capacity (runworker --cpu/--memory); NULL: no limit but its slots.
    cpu_millis = models.BigIntegerField(null=True, blank=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    # How a worker runs executables, as it found at its last heartbeat (bwrap, rlimit,
    # kubernetes), or "" when it cannot; then `sandbox_error` says why. "" for other roles.
    sandbox = models.CharField(max_length=16, blank=True, default="", db_default="")
    sandbox_error = models.TextField(blank=True, default="", db_default="")
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "processes"  # Django's default adds an "s": "Processs"
        indexes = [models.Index(fields=["role", "last_seen_at"], name="process_role_seen_idx")]

    def __str__(self) -> str:
        return self.name


# --- Operations: the figures behind /metrics and the admin dashboard ---------------


class RunCounter(models.Model):
    """Cumulative counts behind the `*_total` metrics, never pruned by retention.

    Workers add one batch of outcomes per upsert (tasks/sql/claim.sql), reviewers their rescues.
    Sharded by process so several workers never queue behind one hot row; /metrics sums shards.
    """

    id = models.BigAutoField(primary_key=True)
    metric = models.CharField(max_length=16)  # "finished" (final status) | "attempt" (outcome)
    kind = models.CharField(max_length=16)
    outcome = models.CharField(max_length=24)
    shard = models.SmallIntegerField()
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["metric", "kind", "outcome", "shard"], name="run_counter_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric}:{self.kind}:{self.outcome}#{self.shard}={self.value}"


class TaskCount(models.Model):
    """How many tasks a user has without a team (`owner`), or a team has (`team`), kept by
    triggers on tasks_task (tasks/sql/task_counts.sql) in the transaction that writes the tasks:
    the default task list's `count` reads these instead of counting the caller's tasks.

    Sharded by the writing backend so transactions creating tasks of one owner at once rarely
    wait on one row; a key's count is the sum of its shards. No foreign keys: a deleted user's
    rows stay, at zero once their tasks are gone.
    """

    id = models.BigAutoField(primary_key=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        related_name="+",
    )
    team = models.ForeignKey(
        "accounts.Team",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        related_name="+",
    )
    shard = models.SmallIntegerField()
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # Team first: one index finds a team's rows and a user's (team IS NULL, owner).
            models.UniqueConstraint(
                fields=["team", "owner", "shard"], nulls_distinct=False, name="task_count_unique"
            ),
            models.CheckConstraint(
                condition=Q(owner__isnull=True) | Q(team__isnull=True),
                name="task_count_one_key",
            ),
        ]

    def __str__(self) -> str:
        key = f"team {self.team_id}" if self.team_id is not None else f"user {self.owner_id}"
        return f"{key}#{self.shard}={self.value}"


class QueueSample(models.Model):
    """One row per minute, written by a reviewer: the admin dashboard's last-hour charts.

    Depth is measured when the row is written (just after its minute); throughput and start
    lateness cover the runs that finished during the minute.
    """

    minute = models.DateTimeField(primary_key=True)
    due = models.IntegerField()
    waiting_for_resource = models.IntegerField()
    running = models.IntegerField()
    finished = models.IntegerField()
    failed = models.IntegerField()
    lateness_p50 = models.FloatField(null=True)
    lateness_p99 = models.FloatField(null=True)
    lateness_max = models.FloatField(null=True)

    def __str__(self) -> str:
        return self.minute.isoformat()


class Calendar(models.Model):
    """A user's days and windows off: holidays of a country (the `holidays` package), dates, and
    freeze windows. Schedules name calendars in `exclude` (tasks/exclusions.py reads them)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(
        "accounts.Team", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    name = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    # {"country": "DE", "subdivision": "BY"} or {} for none.
    holidays = models.JSONField(default=dict, blank=True)
    dates = models.JSONField(default=list, blank=True)  # ["2026-12-24", ...], sorted
    windows = models.JSONField(default=list, blank=True)  # [{"start", "end"}] in UTC, sorted
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class CalendarFeed(models.Model):
    """A user's calendar feed token: what `?token=` of the `.ics` feeds must carry (calendar
    apps send no Authorization header). One per user, made on first use, replaced by a
    rotation. Kept as it is, not hashed: the task view shows the feed's URL with it
    (docs/security.md, "Calendar feeds")."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    token = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()  # when this token was made: the last rotation

    def __str__(self) -> str:
        return f"calendar feed of {self.owner_id}"


# Workflows' models live in their own module; imported here so that Django finds them.
from tasks.workflow_models import Workflow as Workflow  # noqa: E402
from tasks.workflow_models import WorkflowRun as WorkflowRun  # noqa: E402
from tasks.workflow_models import WorkflowStep as WorkflowStep  # noqa: E402
