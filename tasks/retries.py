"""Pure retry policy: attempt number -> delay before the next attempt."""

from __future__ import annotations

import random


def backoff_seconds(
    attempt: int, *, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**(attempt-1))].

    Full jitter spreads a burst of failures over the whole window instead of retrying them in
    lock-step (AWS Architecture Blog, "Exponential Backoff And Jitter").
    """
    exponent = min(max(attempt - 1, 0), 62)
    ceiling = min(cap, base * (2**exponent))
    return (rng or random).uniform(0, ceiling)
