"""The events the outbox carries: the vocabulary, and which state change queues which event.

The notifications app's models, API and messages take the vocabulary from here; the transitions
build their events with the functions below and hand them to `tasks.outbox.enqueue`.

The one table of which state change queues which event (docs/notifications.md says the same to
users), with the code that decides it; nothing else queues an event:

    state change                                    event               decided by
    an attempt succeeded (run `succeeded`)          succeeded           claim.sql `record`
    an attempt failed or timed out, attempts left   failed              claim.sql `record`
    the last attempt failed (run `failed`)          retries_exhausted   claim.sql `record`
    the reviewer rescued a run of a dead worker     stuck               rescue_events
      ... with no attempts left (run `failed`)      + retries_exhausted rescue_events
    a due run flagged past the start SLA            stuck               starved_events
    an occurrence `skipped` at planning (misfire)   missed              skipped_events
      or by the overlap policy `skip`
    a candidate `skipped` at claim (misfire)        missed              claim.sql `claim`
    any occurrence recorded `skipped`: the above,   skipped             skip_events, and
      a paused task's, one skipped on request                           claim.sql `claim`
    the watch flagged a running run quiet           zombie              zombie_events
    a task's health changed (its `expect`, below)   failing, overdue,   claim.sql `record`,
      or a reminder of it is due (`repeat_every`)     late, recovered   expect.sql (reviewer)
    a run succeeded sooner than `duration.min`      too_fast            claim.sql `record`
    a run still running past `duration.max`         too_slow            expect.sql (reviewer)
    a workflow run ended `succeeded`                workflow_succeeded  notifications' trigger
    a workflow run ended `failed`                   workflow_failed       on tasks_workflowrun
    a workflow went `overdue` (its `expect`):       workflow_overdue    expect.sql (reviewer),
      no workflow run succeeded in success_within                         notifications' trigger
                                                                          on tasks_workflow

Health (tasks/expectations.py) is `up`, `late`, `failing` or `overdue`; an alert is queued when
it changes, not for every run while it stays: `failing` when `failure_streak` final failures
follow each other, `late` when a run has not started `start_within` after its scheduled_at,
`overdue` when nothing succeeded for `success_within`; a state only gives way to a graver one
(failing > overdue > late), and the next success makes the task `up` again with `recovered`.

(In claim.sql, the CTEs `notified` and `missed_notified`.) A release at shutdown, a cancellation
and a run held back for capacity queue nothing.

A workflow run's events are the workflow's, not a task's: its `notify` names them (and an
owner's channel may list them in `all_tasks_events`), and they are queued by the transition of
the workflow run's row from `running` to its end (tasks/sql/workflows.sql ends it, in the
transaction that records its last step's outcome), by a trigger the notifications app installs
on that row (notifications/sql/functions.sql): once per end, since the row lock makes that
transition happen once. A cancelled workflow run queues nothing, as a cancelled run does not.
`workflow_overdue` is queued the same way by a trigger on the workflow's row, when the
reviewer's `workflow_overdue` pass moves its `overdue_from` to a new lapse (once per lapse).
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

# The event vocabulary, in the order the API's documentation lists it.
EVENTS = (
    "succeeded",
    "failed",
    "retries_exhausted",
    "missed",
    "stuck",
    "zombie",
    "late",
    "too_fast",
    "too_slow",
    "failing",
    "overdue",
    "recovered",
    "skipped",
    "workflow_succeeded",
    "workflow_failed",
    "workflow_overdue",
)

# The events of a workflow (a workflow's `notify` takes these and no other): a workflow run's
# end, and the workflow's expectation (`expect.success_within`) not met.
WORKFLOW_EVENTS = ("workflow_succeeded", "workflow_failed", "workflow_overdue")

# The events that a task's expectations raise (tasks/expectations.py), for the alert counter.
ALERTS = ("late", "too_fast", "too_slow", "failing", "overdue", "recovered")

# (run id, task id, attempt or None for "the run's current attempt", event)
Event = tuple[UUID, UUID, int | None, str]


def rescue_events(rows: Iterable[tuple[UUID, str, UUID]]) -> list[Event]:
    """Events for runs the reviewer rescued, rows (run id, new status, task id): `stuck`, and
    `retries_exhausted` as well when the rescue spent the run's last attempt."""
    events: list[Event] = []
    for run_id, status, task_id in rows:
        events.append((run_id, task_id, None, "stuck"))
        if status == "failed":
            events.append((run_id, task_id, None, "retries_exhausted"))
    return events


def starved_events(rows: Iterable[tuple[UUID, UUID, int]]) -> list[Event]:
    """Events for runs the reviewer flagged past the start SLA, rows (run id, task id, attempt)."""
    return [(run_id, task_id, attempt, "stuck") for run_id, task_id, attempt in rows]


def skipped_events(rows: Iterable[tuple[UUID, UUID, int | None]]) -> list[Event]:
    """Events for occurrences recorded `skipped` by the misfire policy at planning or by the
    overlap policy, rows (run id, task id, attempt or None for the run's current one)."""
    return [(run_id, task_id, attempt, "missed") for run_id, task_id, attempt in rows]


# Why an occurrence was skipped: a skipped run's `skip_kind` (the CHECK run_skip_kind_valid
# lists them), scheduler_runs_skipped_total's `reason` and a `skipped` message's. Each skipping
# transition writes its own kind beside the words of its `error`:
#   misfire    claim.sql `missed`, planning (occurrences.advance)
#   overlap    overlap.sql `set_aside`
#   pause      planning, for occurrences that fell while the task was paused
#   request    lifecycle.skip_next
#   exclusion  planning and backfill.sql: a calendar's holiday or date, or a freeze window
#   upstream   workflows.sql: a workflow step whose `on` its upstream steps did not meet
SKIP_KINDS = ("misfire", "overlap", "pause", "request", "exclusion", "upstream")


def skip_events(rows: Iterable[tuple[UUID, UUID, int | None]]) -> list[Event]:
    """`skipped` for every occurrence recorded skipped, whatever the reason (the run's error
    says it), rows (run id, task id, attempt or None for the run's current one)."""
    return [(run_id, task_id, attempt, "skipped") for run_id, task_id, attempt in rows]


def zombie_events(rows: Iterable[tuple[UUID, UUID, int]]) -> list[Event]:
    """Events for running runs the worker's watch flagged quiet, rows (run id, task id, attempt)."""
    return [(run_id, task_id, attempt, "zombie") for run_id, task_id, attempt in rows]
