"""The worker role: claim due runs, execute them, record their outcomes.

    worker.py     Worker: the loop (tasks.loop.run_loop) that records and claims in one
                  statement per cycle, starts each run on its execute_at, drains on shutdown
    flight.py     InFlight: one held run; the outcome its attempt came to (retry, backoff)
    watch.py      the watch thread: heartbeats, LISTEN, stopping runs no longer held; it sees
                  the worker only through watch.HeldRuns
    executors.py  what running a run does, per task kind (handler, http, executable)
    sandbox.py    executables under bubblewrap or rlimits (no Django)
    supervisor.py the sandbox's per-run supervisor, run as a script (standard library only)

The transitions the worker makes (claim, record, overlap) are tasks/transitions/claim.py and
overlap.py. This __init__ imports nothing, so the sandbox stays importable without Django.
"""
