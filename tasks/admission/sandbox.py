"""Sandbox: a due executable run while no live worker can run executables (none has a
sandbox). No worker claims it then (claim.sql's `{executables}`); the reviewer marks it with the
workers' reason and releases it once one can (tasks/sql/no_sandbox.sql, `hold` and `release`;
tasks/transitions/no_sandbox.py). It takes over a start-SLA mark: this is the cause."""

from __future__ import annotations

from tasks.admission.wait import Wait

KIND = "sandbox"
WORDS = "no live worker can run executables: {why}"

WAIT = Wait(
    reason="sandbox",
    kind=KIND,
    decided="reviewer",
    released="the reviewer, once a worker has a sandbox",
    words=WORDS,
)
