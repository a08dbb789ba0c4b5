"""A reason a due run does not start, as the admission table states it."""

from __future__ import annotations

from typing import NamedTuple


class Wait(NamedTuple):
    reason: str  # the table's first column
    kind: str  # tasks_run.wait_kind; "" when the reason never marks its runs
    decided: str  # where: claim, reviewer (and, later, release)
    released: str  # what lets its runs start again
    words: str  # wait_reason as users read it; `{...}` is filled in by the deciding statement
