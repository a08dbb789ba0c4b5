"""`schedctl workflows` and `schedctl workflow-runs`: list, show and start workflows; show,
cancel and retry workflow runs (docs/workflows.md). Tables show whole ids; --json the API's."""

from __future__ import annotations

import json
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer
from rich.markup import escape
from rich.table import Table

from schedctl import render
from schedctl.client import ApiError
from schedctl.main import JsonOption, TzOption, api_failed, client, emit, out, zone_of

workflows_app = typer.Typer(help="List, show and run workflows.", no_args_is_help=True)
runs_app = typer.Typer(help="Show, cancel and retry workflow runs.", no_args_is_help=True)
OUTPUT_HEAD = 60  # characters of a step's output a table shows (--json has it whole)


@workflows_app.command("ls")
def workflows_ls(
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    tz: TzOption = None,
    as_json: JsonOption = False,
) -> None:
    """The workflows, newest first."""
    zone = zone_of(tz)
    try:
        page = client().get("/api/v1/workflows", page_size=limit)
    except ApiError as exc:
        api_failed(exc, "workflows ls")
    if as_json:
        emit(page["results"])
        return
    table = render.listing("id", "name", "steps", "next run", "created")
    for workflow in page["results"]:
        table.add_row(
            workflow["id"],
            escape(workflow.get("name") or ""),
            str(len(workflow.get("steps") or [])),
            render.local_time(workflow.get("next_run_at"), zone) or "-",
            render.local_time(workflow.get("created_at"), zone),
        )
    render.print_table(out, table)


@workflows_app.command("get")
def workflows_get(workflow_id: str, tz: TzOption = None, as_json: JsonOption = False) -> None:
    """One workflow: its steps with their `after` and `on`, and its latest runs."""
    zone = zone_of(tz)
    api = client()
    try:
        found = api.get(f"/api/v1/workflows/{workflow_id}")
        runs = api.get(f"/api/v1/workflows/{workflow_id}/runs", page_size=5)["results"]
    except ApiError as exc:
        api_failed(exc, f"workflow {workflow_id}")
    if as_json:
        emit(found)
        return
    out.print(f"workflow {escape(found['name'])}  {found['id']}", highlight=False)
    out.print(f"schedule: {escape(schedule_text(found))}", highlight=False)
    out.print(f"priority: {found.get('priority', 5)}", highlight=False)
    within = (found.get("expect") or {}).get("success_within")
    if within is not None:
        health = found.get("health", "ok")
        out.print(f"health: {health} (a success expected every {within:g} s)", highlight=False)
    if found.get("next_run_at"):
        out.print(f"next run: {render.local_time(found['next_run_at'], zone)}", highlight=False)
    table = render.listing("step", "after", "on", "kind")
    for step in found["steps"]:
        table.add_row(
            escape(step["id"]),
            escape(", ".join(step.get("after") or [])),
            step.get("on") or "success",
            escape(str((step.get("task") or {}).get("kind") or "")),
        )
    render.print_table(out, table)
    if runs:
        out.print("latest runs:")
        render.print_table(out, runs_table(runs, zone))


@workflows_app.command("run")
def workflows_run(workflow_id: str, tz: TzOption = None, as_json: JsonOption = False) -> None:
    """Start a workflow run now."""
    act(f"/api/v1/workflows/{workflow_id}/run", "started", tz, as_json)


@runs_app.command("get")
def workflow_runs_get(run_id: str, tz: TzOption = None, as_json: JsonOption = False) -> None:
    """One workflow run: its status and each step's status, run, output or reason."""
    zone = zone_of(tz)
    try:
        found = client().get(f"/api/v1/workflow-runs/{run_id}")
    except ApiError as exc:
        api_failed(exc, f"workflow run {run_id}")
    if as_json:
        emit(found)
        return
    print_run(found, zone)


@runs_app.command("cancel")
def workflow_runs_cancel(run_id: str, tz: TzOption = None, as_json: JsonOption = False) -> None:
    """Cancel a workflow run: waiting and scheduled steps cancelled, running ones stopped."""
    act(f"/api/v1/workflow-runs/{run_id}/cancel", "cancelled", tz, as_json)


@runs_app.command("retry")
def workflow_runs_retry(run_id: str, tz: TzOption = None, as_json: JsonOption = False) -> None:
    """Run a failed or cancelled workflow run's failed, cancelled and skipped steps again."""
    act(f"/api/v1/workflow-runs/{run_id}/retry", "retried", tz, as_json)


def act(path: str, verb: str, tz: str | None, as_json: bool) -> None:
    zone = zone_of(tz)
    try:
        found = client().post(path)
    except ApiError as exc:
        api_failed(exc, verb)
    if as_json:
        emit(found)
        return
    out.print(f"{verb}: {found['id']} {found['status']}", highlight=False)
    print_run(found, zone)


def print_run(found: dict[str, Any], zone: ZoneInfo | None) -> None:
    finished = render.local_time(found.get("finished_at"), zone) or "-"
    out.print(
        f"workflow run {found['id']}  {found['status']}  workflow {found['workflow']}\n"
        f"started {render.local_time(found.get('started_at'), zone)}  finished {finished}",
        highlight=False,
    )
    table = render.listing("step", "status", "run", "output / reason")
    for step in found["steps"]:
        table.add_row(
            escape(step["id"]),
            step.get("status") or "",
            step.get("run") or "",
            escape(head(step)),
        )
    render.print_table(out, table)


def schedule_text(workflow: dict[str, Any]) -> str:
    """The schedule as the API answers it, compact; `none (on demand)` without one."""
    schedule = workflow.get("schedule")
    if not schedule:
        return "none (started on demand)"
    return json.dumps(schedule, separators=(",", ":"))


def head(step: dict[str, Any]) -> str:
    if step.get("reason"):
        return str(step["reason"])
    if "output" not in step:
        return ""
    output = step["output"]
    text = output if isinstance(output, str) else json.dumps(output, separators=(",", ":"))
    return text if len(text) <= OUTPUT_HEAD else text[: OUTPUT_HEAD - 1] + "…"


def runs_table(runs: list[dict[str, Any]], zone: ZoneInfo | None) -> Table:
    table = render.listing("id", "status", "started", "finished")
    for run in runs:
        table.add_row(
            run["id"],
            run["status"],
            render.local_time(run.get("started_at"), zone),
            render.local_time(run.get("finished_at"), zone),
        )
    return table
