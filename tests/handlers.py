"""Handlers the tests register in role processes through SCHEDULER_HANDLER_MODULES."""

from __future__ import annotations

import os
import time
from typing import Any

from tasks.handlers import HandlerContext, register

BODY_STARTS: dict[str, float] = {}  # run id -> when `body_start` began, on this host's clock


@register("record")
def record(context: HandlerContext, **args: Any) -> None:
    """Append `idempotency_key run_id attempt` to $TEST_RECORD_DIR/<pid>.log: duplicates show."""
    folder = os.environ["TEST_RECORD_DIR"]
    line = f"{context.idempotency_key} {context.run_id} {context.attempt}\n"
    with open(os.path.join(folder, f"{os.getpid()}.log"), "a") as out:
        out.write(line)
    time.sleep(float(args.get("sleep", 0)))


@register("step")
def step(context: HandlerContext, **args: Any) -> Any:
    """A workflow step: sleeps `sleep` seconds, then returns its `name` and the outputs of the
    steps before it (context.steps), so a test reads what each step received. `first_sleep`:
    seconds more on the first attempt only (a worker killed meanwhile)."""
    time.sleep(float(args.get("sleep", 0)))
    if context.attempt == 1:
        time.sleep(float(args.get("first_sleep", 0)))
    return {"name": args.get("name"), "received": context.steps}


@register("body_start")
def body_start(context: HandlerContext, **args: Any) -> None:
    """When the body began (time.time()), in BODY_STARTS: for an in-process worker's test."""
    BODY_STARTS[context.run_id] = time.time()
