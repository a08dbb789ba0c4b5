"""Upstream steps: a workflow step's run whose `after` steps have not all ended. Decided at
release: a workflow run's steps with `after` are made held (tasks/transitions/workflows.py), with
`execute_at` at `HELD_UNTIL` so that no claim's candidate scan reaches them and the claim stays
as it is. Released by the transaction that records an upstream step's final outcome: a trigger on
tasks_run (tasks/sql/workflows.sql, `step_ended_function`) schedules the steps whose upstream
steps have all ended, or records them `skipped` (skip_kind `upstream`) when their `on` is not
met; the reviewer finishes what a crash left (`resolve_workflow_runs`)."""

from __future__ import annotations

from datetime import UTC, datetime

from tasks.admission.wait import Wait

KIND = "upstream"
WORDS = "waiting for upstream steps {steps}"
# Beyond any claim's window; the release sets the real instant. Year 9999's start, not its end,
# so that no time zone conversion of it leaves Python's datetime range.
HELD_UNTIL = datetime(9999, 1, 1, tzinfo=UTC)

WAIT = Wait(
    reason="upstream steps",
    kind=KIND,
    decided="release",
    released="the end of its last upstream step",
    words=WORDS,
)
