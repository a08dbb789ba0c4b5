"""`manage.py ops <verb>`: look at and act on tasks and runs from a shell, without the API.

    ops tasks [--status S] [--kind K] [--owner NAME] [--name TEXT] [--limit N]
    ops runs [--task ID] [--status S] [--limit N]
    ops showtask ID          ops showrun ID
    ops pausetask ID         ops resumetask ID        ops canceltask ID [--force]
    ops retryrun ID          ops cancelrun ID

Every change goes through tasks.transitions (lifecycle, run_actions), as the API and the admin do.
"""

from __future__ import annotations

import getpass
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks import audit
from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import RUN_STATUSES, Attempt, Run, Task
from tasks.transitions import lifecycle, run_actions


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with aligned columns, readable in any terminal or log."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {_cell(value)}" for name, value in pairs)


class Command(BaseCommand):
    help = "List, show, pause, resume, retry and cancel tasks and runs (readable tables)."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="verb")
        tasks = verbs.add_parser("tasks", help="list tasks, newest first")
        tasks.add_argument("--status", choices=Task.Status.values)
        tasks.add_argument("--kind", choices=Task.Kind.values)
        tasks.add_argument("--owner", help="owner's username")
        tasks.add_argument("--name", help="part of the task's name")
        tasks.add_argument("--limit", type=int, default=50)
        runs = verbs.add_parser("runs", help="list runs, newest first")
        runs.add_argument("--task", help="only this task's runs")
        runs.add_argument("--status", choices=RUN_STATUSES)
        runs.add_argument("--limit", type=int, default=50)
        for verb, what in (
            ("showtask", "a task with its next and recent runs"),
            ("showrun", "a run with its attempts and output"),
            ("pausetask", "pause a task"),
            ("resumetask", "resume a paused task"),
            ("canceltask", "cancel a task: no further runs"),
            ("retryrun", "schedule a failed or cancelled run again now"),
            ("cancelrun", "cancel a scheduled run, or stop a running one"),
        ):
            sub = verbs.add_parser(verb, help=what)
            sub.add_argument("id")
            if verb == "canceltask":
                sub.add_argument("--force", action="store_true", help="also stop a running run")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        # The audit log names the command line and the shell's user (no request, no address).
        actor = audit.Actor(name=f"manage.py ops ({getpass.getuser()})")
        try:
            with audit.acting(actor):
                getattr(self, f"do_{verb}")(options)
        except TasksError as exc:  # e.g. retrying a run that succeeded: the API's 409
            raise CommandError(exc.detail) from exc

    # --- lists --------------------------------------------------------------------------
    def do_tasks(self, options: dict[str, Any]) -> None:
        queryset = Task.objects.select_related("owner").order_by("-id")  # uuid7: newest first
        for field in ("status", "kind"):
            if options[field]:
                queryset = queryset.filter(**{field: options[field]})
        if options["owner"]:
            queryset = queryset.filter(owner__username=options["owner"])
        if options["name"]:
            queryset = queryset.filter(name__icontains=options["name"])
        rows = [
            (
                t.id,
                t.name,
                t.owner.get_username(),
                t.kind,
                t.schedule_type,
                t.priority,
                t.status,
                t.next_unplanned_at,
            )
            for t in queryset[: options["limit"]]
        ]
        headers = ["id", "name", "owner", "kind", "schedule", "prio", "status", "unplanned from"]
        self.stdout.write(table(headers, rows))

    def do_runs(self, options: dict[str, Any]) -> None:
        queryset = Run.objects.all()
        if options["task"]:
            # run_unique_task_scheduled_at serves one task's history, newest first.
            queryset = queryset.filter(task=self._task(options["task"])).order_by("-scheduled_at")
        else:
            queryset = queryset.order_by("-id")  # uuid7: newest first, by primary key
        if options["status"]:
            queryset = queryset.filter(status=options["status"])
        rows = [
            (
                r.id,
                r.task_id,
                r.scheduled_at,
                r.status,
                f"{r.attempt}/{r.max_attempts}",
                r.started_at,
                r.finished_at,
                r.error,
            )
            for r in queryset[: options["limit"]]
        ]
        headers = ["id", "task", "scheduled", "status", "attempt", "started", "finished", "error"]
        self.stdout.write(table(headers, rows))

    # --- one object ---------------------------------------------------------------------
    def do_showtask(self, options: dict[str, Any]) -> None:
        task = self._task(options["id"])
        self.stdout.write(
            fields(
                [
                    ("id", task.id),
                    ("name", task.name),
                    ("owner", task.owner.get_username()),
                    ("kind", task.kind),
                    ("payload", json.dumps(task.payload)),
                    ("schedule", json.dumps(task.schedule)),
                    ("priority", task.priority),
                    ("status", task.status),
                    ("unplanned from", task.next_unplanned_at),
                    ("max attempts", task.max_attempts),
                    ("timeout", task.timeout),
                    ("created", task.created_at),
                    ("updated", task.updated_at),
                ]
            )
        )
        recent = task.runs.order_by("-scheduled_at")[:10]
        self.stdout.write("\nRecent runs:")
        self.stdout.write(
            table(
                ["id", "scheduled", "status", "attempt", "finished"],
                [(r.id, r.scheduled_at, r.status, r.attempt, r.finished_at) for r in recent],
            )
        )

    def do_showrun(self, options: dict[str, Any]) -> None:
        run = self._run(options["id"])
        self.stdout.write(
            fields(
                [
                    ("id", run.id),
                    ("task", run.task_id),
                    ("status", run.status),
                    ("waiting for", run.wait_reason or None),
                    ("zombie since", run.zombie_since),
                    ("scheduled", run.scheduled_at),
                    ("execute at", run.execute_at),
                    ("attempt", f"{run.attempt}/{run.max_attempts}"),
                    ("priority", run.priority),
                    ("worker", run.worker or None),
                    ("started", run.started_at),
                    ("finished", run.finished_at),
                    ("exit code", run.exit_code),
                    ("http status", run.http_status),
                    ("error", run.error or None),
                    ("idempotency key", run.idempotency_key),
                ]
            )
        )
        attempts = Attempt.objects.filter(run=run).order_by("number")
        self.stdout.write("\nAttempts:")
        self.stdout.write(
            table(
                ["number", "worker", "started", "finished", "outcome", "error"],
                [
                    (a.number, a.worker, a.started_at, a.finished_at, a.outcome, a.error)
                    for a in attempts
                ],
            )
        )
        self.stdout.write("\nOutput:\n" + (run.output or "-"))

    # --- actions ------------------------------------------------------------------------
    def do_pausetask(self, options: dict[str, Any]) -> None:
        task = lifecycle.pause_task(task=self._task(options["id"]), now=db_now())
        self.stdout.write(f"task {task.id} is {task.status}")

    def do_resumetask(self, options: dict[str, Any]) -> None:
        task = lifecycle.resume_task(task=self._task(options["id"]), now=db_now())
        self.stdout.write(f"task {task.id} is {task.status}")

    def do_canceltask(self, options: dict[str, Any]) -> None:
        task = self._task(options["id"])
        task = lifecycle.cancel_task(task=task, force=options["force"], now=db_now())
        self.stdout.write(f"task {task.id} is {task.status}")

    def do_retryrun(self, options: dict[str, Any]) -> None:
        run = run_actions.retry_run(run=self._run(options["id"]), now=db_now())
        self.stdout.write(f"run {run.id} is {run.status} (execute at {_cell(run.execute_at)})")

    def do_cancelrun(self, options: dict[str, Any]) -> None:
        run = run_actions.cancel_run(run=self._run(options["id"]), now=db_now())
        self.stdout.write(f"run {run.id} is {run.status}")

    # --- lookups ------------------------------------------------------------------------
    def _task(self, value: str) -> Task:
        task = Task.objects.select_related("owner").filter(pk=_uuid(value)).first()
        if task is None:
            raise CommandError(f"no task {value}")
        return task

    def _run(self, value: str) -> Run:
        run = Run.objects.filter(pk=_uuid(value)).first()
        if run is None:
            raise CommandError(f"no run {value}")
        return run


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CommandError(f"{value!r} is not an id (a UUID)") from None
