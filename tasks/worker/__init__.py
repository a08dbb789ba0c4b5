"""The worker role: claim due runs, execute them, record their outcomes; one module per part
of a worker (its loop, a held run, the watch thread, the executors per task kind, the sandbox,
the Kubernetes executor), named for what it holds.

The transitions the worker makes (claim, record, overlap) live in tasks/transitions/, like every
other change of state. This __init__ imports nothing, so the sandbox (sandbox.py and what it
imports) stays importable without Django; its supervisor (supervisor.py) runs as a script of the
standard library alone.
"""
