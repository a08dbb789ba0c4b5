"""The floor of a lateness figure, measured in the same run: how late a thread that does
nothing but sleep to a deadline wakes up on this machine at this moment (CPU contention, timer
slack). A start lateness close to it is as good as the machine allows."""

from __future__ import annotations

import threading
import time

from bench.proc import percentile


def pct(values: list[float], p: float) -> float:
    """The p-th percentile of sorted `values` (nearest rank), rounded to 0.1."""
    return round(percentile(values, p), 1)


class TimerFloor(threading.Thread):
    """Wake-up lateness of a sleeping thread that does nothing else: the machine's own noise."""

    def __init__(self, step: float = 0.02) -> None:
        super().__init__(name="timer-floor", daemon=True)
        self.step, self.stopping, self.late_ms = step, threading.Event(), []

    def run(self) -> None:
        target = time.monotonic() + self.step
        while not self.stopping.is_set():
            time.sleep(max(0.0, target - time.monotonic()))
            self.late_ms.append((time.monotonic() - target) * 1000)
            target += self.step
            target = max(target, time.monotonic())  # never queue up wake-ups after a stall

    def figures(self) -> dict:
        late = sorted(self.late_ms)
        return {
            "p50_ms": pct(late, 50),
            "p99_ms": pct(late, 99),
            "max_ms": round(late[-1], 1) if late else 0.0,
            "samples": len(late),
        }
