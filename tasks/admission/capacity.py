"""Capacity: a due run the worker claiming it has no free capacity for (its requests, or a
higher-priority run's, do not fit what the worker's runs in flight leave). Strict priority: the
first run that does not fit holds every run after it. Decided and released by the claim
(tasks/sql/claim.sql, `held`): the next claim with room starts it and clears the kind."""

from __future__ import annotations

from tasks.admission.wait import Wait

KIND = "capacity"
WORDS = "waiting for free capacity ({requests}) on a worker"
BEHIND = "waiting behind a higher-priority run that needs free capacity"  # no requests of its own

WAIT = Wait(
    reason="capacity",
    kind=KIND,
    decided="claim",
    released="the next claim with room for it",
    words=WORDS,
)
