"""Start SLA: a due run no worker started within TASKS_START_SLA_SECONDS, for no reason known to
the statement (every worker busy). Marked by the reviewer (tasks/sql/rescue.sql,
`flag_starved`, with a `stuck` event); still claimable, released by the claim that starts it. A
known cause found later (sandbox) takes its place."""

from __future__ import annotations

from tasks.admission.wait import Wait

KIND = "start_sla"
WORDS = "not started within the start SLA ({sla} s)"

WAIT = Wait(
    reason="start SLA",
    kind=KIND,
    decided="reviewer",
    released="the claim that starts it",
    words=WORDS,
)
