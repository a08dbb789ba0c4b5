"""Concurrency key: a due run whose key already has `limit` runs running (counted exactly under
the key row's lock, tasks/sql/claim.sql `key_ctes`). The claim marks the candidates it holds
back; the reviewer marks the due runs the claims' scan skipped (tasks/sql/limits.sql,
`hold_keyed`). Released by the claim after a run of the key ends (strict priority, then due
order, within the key)."""

from __future__ import annotations

from tasks.admission.wait import Wait

KIND = "concurrency_key"
WORDS = "waiting for concurrency key {key} ({running} of {limit} running)"

WAIT = Wait(
    reason="concurrency key",
    kind=KIND,
    decided="claim, reviewer",
    released="the claim after a run of the key ends",
    words=WORDS,
)
