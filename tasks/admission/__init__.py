"""Why a due run does not start: the vocabulary (`wait_kind`), and for each reason where it is
decided, what releases it and the words users see.

A run held back is `waiting_for_resource` (still claimable unless its row says otherwise) with
`wait_kind` naming the reason and `wait_reason` the words built from it for people; statements
choose runs by `wait_kind`, never by the words. One module here per reason states its rule; the
statements that decide live under tasks/sql/ and name the kind they write. The CHECK
`run_wait_kind_valid` (tasks/models.py) admits exactly the kinds below, and
tests/tasks/test_admission.py holds this table, `WAITS`, the CHECK and the statements equal.

The one table (docs/architecture.md, "The claim", says the same in prose): each reason, its
`wait_kind`, where it is decided, what releases it, and below it the words users read
(`wait_reason`; `{...}` is filled in by the statement that decides):

    reason           wait_kind        decided at       released by
    capacity         capacity         claim            the next claim with room for it
        "waiting for free capacity ({requests}) on a worker"
    resources        resources        reviewer         the reviewer, once a live worker offers it
        "no live worker offers {requests}"
    concurrency key  concurrency_key  claim, reviewer  the claim after a run of the key ends
        "waiting for concurrency key {key} ({running} of {limit} running)"
    rate key         rate_key         claim, reviewer  the claim once the key's window frees
        "rate limit {key}: {limit} per {per} s reached, next start at {at}"
    sandbox          sandbox          reviewer         the reviewer, once a worker has a sandbox
        "no live worker can run executables: {why}"
    owner cap        -                claim            the claim after a run of the owner ends
        ""
    start SLA        start_sla        reviewer         the claim that starts it
        "not started within the start SLA ({sla} s)"
    upstream steps   upstream         release          the end of its last upstream step
        "waiting for upstream steps {steps}"

`-`: never marked; the claim skips the owner's runs, which stay `scheduled`. Each module names
the statements (tasks/sql/) that decide and release its reason. A new reason is a module here,
a row in the table and in `WAITS`, a kind in the CHECK (a migration), and a release in the
transaction that ends what it waits for, not a scan in every claim (as `upstream`, workflows'
dependencies, does: tasks/sql/workflows.sql).
"""

from __future__ import annotations

from tasks.admission import (
    capacity,
    concurrency_key,
    owner_cap,
    rate_key,
    resources,
    sandbox,
    start_sla,
    upstream,
)
from tasks.admission.wait import Wait

# The table above, in its order.
WAITS: tuple[Wait, ...] = (
    capacity.WAIT,
    resources.WAIT,
    concurrency_key.WAIT,
    rate_key.WAIT,
    sandbox.WAIT,
    owner_cap.WAIT,
    start_sla.WAIT,
    upstream.WAIT,
)

# Every value `tasks_run.wait_kind` may hold: "" (not waiting) and the kinds of the reasons
# that mark their runs. The CHECK run_wait_kind_valid is built from it.
WAIT_KINDS: tuple[str, ...] = ("", *(w.kind for w in WAITS if w.kind))

__all__ = ["WAITS", "WAIT_KINDS", "Wait"]
