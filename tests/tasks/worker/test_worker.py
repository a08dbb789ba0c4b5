"""The worker's own decisions, in process: a run given back at shutdown is never also started."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

from tasks.transitions.claim import ClaimedRun
from tasks.worker.executors import ExecutionResult
from tasks.worker.flight import InFlight
from tasks.worker.worker import Worker


def due_flight() -> InFlight:
    now = datetime.now(UTC)
    run = ClaimedRun(
        id=uuid.uuid4(),
        task_id=uuid.uuid4(),
        scheduled_at=now,
        execute_at=now,
        attempt=1,
        max_attempts=3,
        kind="handler",
        payload={"name": "noop", "args": {}},
        executable="",
        timeout=10.0,
        backoff_base=2.0,
        backoff_cap=60.0,
        claimed_at=now,
        overlap="allow",
        priority=5,
        cpu_millis=0,
        memory_bytes=0,
    )
    mono = time.monotonic()
    return InFlight(run=run, claimed_mono=mono, start_mono=mono, claim_seq=1)


def test_a_run_released_by_the_shutdown_as_it_starts_is_not_executed() -> None:
    executed = []

    def executor(run, **kwargs) -> ExecutionResult:
        executed.append(run.id)
        return ExecutionResult(ok=True)

    worker = Worker(concurrency=1, executor=executor)
    worker.pool.shutdown()
    flight = due_flight()
    worker.inflight[flight.run.id] = flight

    # The payload thread reaches its start while the shutdown gives the not-started runs back:
    # the release's snapshot and cancel happen first, under the worker's lock.
    with worker.lock:
        starter = threading.Thread(target=worker._execute, args=(flight,))
        starter.start()
        time.sleep(0.2)  # the thread is past its wait for the start time, at the lock
        released = [f for f in worker.inflight.values() if f.started_mono is None]
        for f in released:
            f.cancel.set()
    starter.join(timeout=5)

    assert released == [flight]
    assert executed == []  # given back to the queue: the next worker runs it, not this one
    assert flight.started_mono is None
    finished, result = worker.results.get(timeout=1)
    assert finished is flight and result.cancelled


def test_a_due_run_starts_and_is_executed_once() -> None:
    executed = []

    def executor(run, **kwargs) -> ExecutionResult:
        executed.append(run.id)
        return ExecutionResult(ok=True)

    worker = Worker(concurrency=1, executor=executor)
    worker.pool.shutdown()
    flight = due_flight()
    worker.inflight[flight.run.id] = flight
    worker._execute(flight)

    assert executed == [flight.run.id]
    assert flight.started_mono is not None
