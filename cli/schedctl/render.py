"""What people see: plans as a coloured diff, tasks and runs as tables (scripts take --json)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# A schedule's members the service keeps for itself: an interval's or rrule's `anchor` is the
# instant it was first stored, not something a file declares or a person changes.
INTERNAL = ("anchor",)


def compact(value: Any) -> str:
    return escape(json.dumps(value, sort_keys=True, separators=(", ", ": ")))


def changed_parts(before: Any, after: Any) -> dict[str, tuple[Any, Any]]:
    """For two objects, the members that differ (so a schedule shows `expression`, not all of
    it); otherwise the values themselves under ""."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted((set(before) | set(after)) - set(INTERNAL))
        return {k: (before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)}
    return {"": (before, after)}


def schedule_text(schedule: Any) -> str:
    if not isinstance(schedule, dict):
        return ""
    kind = schedule.get("type")
    detail = {
        "cron": schedule.get("expression"),
        "interval": f"every {schedule.get('every')}s",
        "daily": schedule.get("at"),
        "weekly": f"{','.join(schedule.get('days') or [])} {schedule.get('at')}",
        "monthly": f"day {schedule.get('day')} {schedule.get('at')}",
        "once": schedule.get("run_at"),
        "rrule": schedule.get("rule"),
    }.get(str(kind), "")
    zone = schedule.get("timezone")
    return f"{kind} {detail}" + (f" ({zone})" if zone and zone != "UTC" else "")


def print_plan(console: Console, plan: dict[str, Any]) -> None:
    console.print(f"[bold]task set {escape(plan['name'])}[/bold]")
    for item in plan["create"]:
        task = item.get("task") or {}
        what = f"{task.get('kind')}, {schedule_text(task.get('schedule'))}"
        console.print(f"  [green]+ create {escape(item['key'])}[/green] ({escape(what)})")
    _print_changes(console, plan, "")
    workflows = plan.get("workflows") or {}
    for item in workflows.get("create", []):
        steps = len((item.get("workflow") or {}).get("steps") or [])
        console.print(f"  [green]+ create workflow {escape(item['key'])}[/green] ({steps} steps)")
    if workflows:
        _print_changes(console, workflows, "workflow ")
    console.print(f"  {summary(plan)}")


def _print_changes(console: Console, plan: dict[str, Any], what: str) -> None:
    for item in plan["update"]:
        console.print(f"  [yellow]~ update {what}{escape(item['key'])}[/yellow]")
        for field, change in item["changes"].items():
            for part, (before, after) in changed_parts(change["from"], change["to"]).items():
                name = f"{field}.{part}" if part else field
                console.print(
                    f"      {escape(name)}: [red]{compact(before)}[/red]"
                    f" -> [green]{compact(after)}[/green]"
                )
    for item in plan["delete"]:
        console.print(f"  [red]- delete {what}{escape(item['key'])}[/red]")


def summary(plan: dict[str, Any]) -> str:
    if not changes(plan):
        return f"No changes ({plan['unchanged']} unchanged)."
    text = (
        f"Plan: {len(plan['create'])} to create, {len(plan['update'])} to update, "
        f"{len(plan['delete'])} to delete, {plan['unchanged']} unchanged."
    )
    workflows = plan.get("workflows") or {}
    if _count(workflows):
        text += (
            f" Workflows: {len(workflows['create'])} to create, {len(workflows['update'])} to "
            f"update, {len(workflows['delete'])} to delete, {workflows['unchanged']} unchanged."
        )
    return text


def _count(plan: dict[str, Any]) -> int:
    return len(plan.get("create", [])) + len(plan.get("update", [])) + len(plan.get("delete", []))


def changes(plan: dict[str, Any]) -> int:
    """The changes of a set's plan, its workflows' included (a service without workflows in
    task sets answers none)."""
    return _count(plan) + _count(plan.get("workflows") or {})


def local_time(value: str | None, zone: ZoneInfo | None) -> str:
    """An API instant (UTC, ISO 8601) as read in `zone` ("2026-12-07 09:00:00+01:00 CET"); as
    given without a zone."""
    if not value or zone is None:
        return value or ""
    at = datetime.fromisoformat(value).astimezone(zone)
    return f"{at.isoformat(sep=' ', timespec='seconds')} {at.tzname()}"


def listing(*headers: str) -> Table:
    """A table of rows as `kubectl get` prints them: a header, no borders."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in headers:
        table.add_column(header, no_wrap=True)
    return table


def print_table(console: Console, table: Table) -> None:
    """Print `table` at its natural width, past a narrower terminal's: nothing is cut or folded,
    so an id shown is an id whole, to paste into the next command."""
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural <= console.width:
        console.print(table)
        return
    wide = Console(
        file=console.file,
        width=natural,
        soft_wrap=True,
        force_terminal=console.is_terminal,
        no_color=console.no_color,
    )
    wide.print(table)


def tasks_table(tasks: list[dict[str, Any]], zone: ZoneInfo | None = None) -> Table:
    table = listing("id", "name", "status", "set/key", "schedule", "next run", "last run")
    for task in tasks:
        last = task.get("last_run") or {}
        member = f"{task['taskset']}/{task['key']}" if task.get("taskset") else ""
        table.add_row(
            task["id"],
            escape(task.get("name") or ""),
            task.get("status", ""),
            escape(member),
            escape(schedule_text(task.get("schedule"))),
            local_time(task.get("next_run_at"), zone),
            last.get("status", ""),
        )
    return table


def runs_table(
    runs: list[dict[str, Any]], names: dict[str, str], zone: ZoneInfo | None = None
) -> Table:
    """`names`: task id -> the task's name, shown in place of its id."""
    table = listing("id", "task", "scheduled", "status", "attempt", "finished", "error")
    for run in runs:
        task = str(run.get("task", ""))
        table.add_row(
            run["id"],
            escape(names.get(task) or task),
            local_time(run.get("scheduled_at"), zone),
            run.get("status", ""),
            str(run.get("attempt", "")),
            local_time(run.get("finished_at"), zone),
            escape((run.get("error") or "")[:60]),
        )
    return table


def fields_table(item: dict[str, Any]) -> Table:
    table = Table("field", "value", show_header=False)
    for key, value in item.items():
        shown = value if isinstance(value, str) else json.dumps(value, indent=1)
        table.add_row(key, escape(shown if value is not None else ""))
    return table
