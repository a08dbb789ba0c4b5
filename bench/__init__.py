"""The benchmark harness (`python -m bench WORKLOAD`, docs/benchmarks.md).

Not part of the product: `.dockerignore` keeps it out of the image. Imports go one way only:
bench imports the product (tasks, notifications, scheduler_project); nothing in the product
imports bench. Role processes it starts load the `bench` handler through
SCHEDULER_HANDLER_MODULES=bench.handlers.
"""

from __future__ import annotations


class BenchError(Exception):
    """A benchmark cannot run or its own checks failed; printed without a traceback."""
