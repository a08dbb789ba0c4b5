"""Concurrency key: a due run whose key already has `limit` runs running, counted under the key
row's lock (tasks/sql/claim.sql `key_ctes`; the reviewer: tasks/sql/limits.sql `hold_keyed`).
Released in strict priority, then due order, within the key."""

from __future__ import annotations

from tasks.admission.wait import Wait

WAIT = Wait(
    reason="concurrency key",
    kind="concurrency_key",
    decided="claim, reviewer",
    released="the claim after a run of the key ends",
    words="waiting for concurrency key {key} ({running} of {limit} running)",
)
