"""Resources: a due run whose requests no live worker offers (a worker's NULL capacity is no
limit). Decided and released by the reviewer (tasks/sql/rescue.sql, `mark_unplaceable`): it
schedules the run again once a big enough worker is alive. The claim never chooses such a run
(its candidates are within the worker's totals), so it blocks no claim meanwhile."""

from __future__ import annotations

from tasks.admission.wait import Wait

KIND = "resources"
WORDS = "no live worker offers {requests}"

WAIT = Wait(
    reason="resources",
    kind=KIND,
    decided="reviewer",
    released="the reviewer, once a live worker offers it",
    words=WORDS,
)
