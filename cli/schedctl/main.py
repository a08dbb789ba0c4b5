"""The `schedctl` commands. Exit codes: 0 done, 1 an error (the API's, with the field's path;
a file that cannot be read; a file `validate` refuses), 2 `diff --exit-code` found differences."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer
from rich.console import Console

from schedctl import config, files, render, schema
from schedctl.client import ApiError, Client

app = typer.Typer(help="The scheduler's command line.", no_args_is_help=True)
tasks_app = typer.Typer(help="List and show tasks.", no_args_is_help=True)
runs_app = typer.Typer(help="List and show runs.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
sets_app = typer.Typer(help="Show and delete task sets.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(sets_app, name="tasksets")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
EXIT_ERROR = 1
EXIT_DIFFERS = 2

FileOption = Annotated[Path, typer.Option("--file", "-f", help="A task set file (YAML or JSON).")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON for scripts.")]
TzOption = Annotated[
    str | None, typer.Option("--tz", help="Show times in this IANA time zone (else UTC).")
]
State: dict[str, Any] = {}


@app.callback()
def main(
    url: Annotated[str | None, typer.Option(help="The API (else SCHEDULER_URL, config).")] = None,
    token: Annotated[
        str | None,
        typer.Option(help="An access token (else SCHEDCTL_TOKEN, SCHEDULER_TOKEN, config)."),
    ] = None,
) -> None:
    State["url"], State["token"] = url, token


def client() -> Client:
    try:
        return Client(config.resolve(State.get("url"), State.get("token")))
    except config.ConfigError as exc:
        fail(str(exc))


def fail(message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(EXIT_ERROR)


def api_failed(exc: ApiError, where: str = "") -> NoReturn:
    status = f" (HTTP {exc.status})" if exc.status else ""
    err.print(f"[red]error{status}:[/red] {where}", highlight=False)
    for path, message in exc.problems:
        err.print(f"  {path}: {message}" if path else f"  {message}", highlight=False, markup=False)
    raise typer.Exit(EXIT_ERROR)


def zone_of(name: str | None) -> ZoneInfo | None:
    if name is None:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        fail(f"--tz: {name!r} is not an IANA time zone")


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")


def load_sets(path: Path) -> list[files.TaskSetFile]:
    try:
        return files.load(path)
    except files.FileError as exc:
        fail(str(exc))


def dry_runs(api: Client, sets: list[files.TaskSetFile]) -> list[dict[str, Any]]:
    plans = []
    for found in sets:
        try:
            plans.append(api.put(f"/api/v1/tasksets/{found.name}", found.body(), dry_run="true"))
        except ApiError as exc:
            api_failed(exc, f"task set {found.name}")
    return plans


@app.command()
def login(
    username: Annotated[str, typer.Option(prompt=True)],
    password: Annotated[str, typer.Option(prompt=True, hide_input=True)],
) -> None:
    """Get a token and store its refresh token (and the URL) in the config file, mode 0600."""
    api = client()
    try:
        tokens = api.login(username, password)
    except ApiError as exc:
        api_failed(exc, "login")
    path = config.write_config({"url": api.settings.url, "refresh": tokens["refresh"]})
    out.print(f"Logged in to {api.settings.url}; the refresh token is in {path}.")


@app.command()
def plan(file: FileOption, as_json: JsonOption = False) -> None:
    """Show what `apply` would change, changing nothing."""
    plans = dry_runs(client(), load_sets(file))
    if as_json:
        emit({"tasksets": plans})
        return
    for one in plans:
        render.print_plan(out, one)


@app.command()
def diff(
    file: FileOption,
    exit_code: Annotated[
        bool, typer.Option("--exit-code", help="Exit 2 when the file and the service differ.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Like plan; with --exit-code, 0 when the service matches the file and 2 when not (CI)."""
    plans = dry_runs(client(), load_sets(file))
    if as_json:
        emit({"tasksets": plans})
    else:
        for one in plans:
            render.print_plan(out, one)
    if exit_code and any(render.changes(one) for one in plans):
        raise typer.Exit(EXIT_DIFFERS)


@app.command()
def apply(
    file: FileOption,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    force: Annotated[
        bool, typer.Option(help="Also cancel running runs of the tasks removed.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Make the service's sets exactly what the file declares (each set all or nothing)."""
    api = client()
    sets = load_sets(file)
    plans = dry_runs(api, sets)  # every entry of every set validated before anything changes
    if not as_json:
        for one in plans:
            render.print_plan(out, one)
    if not any(render.changes(one) for one in plans):
        if as_json:
            emit({"tasksets": plans})
        return
    if not yes and not typer.confirm("Apply these changes?"):
        fail("nothing applied")
    applied = []
    for found in sets:
        params = {"force": "true"} if force else {}
        try:
            applied.append(api.put(f"/api/v1/tasksets/{found.name}", found.body(), **params))
        except ApiError as exc:
            api_failed(exc, f"task set {found.name}")
    if as_json:
        emit({"tasksets": applied})
        return
    for one in applied:
        out.print(
            f"Applied task set {one['name']} (version {one['version']}): {render.summary(one)}"
        )


@app.command()
def validate(file: FileOption) -> None:
    """Check a file against the task set JSON Schema, offline."""
    problems = schema.problems(files.read(file) if file.exists() else fail(f"{file}: no file"))
    if problems:
        for path, message in problems:
            err.print(f"  {path}: {message}", highlight=False, markup=False)
        fail(f"{file} does not match the task set schema")
    out.print(f"{file}: valid")


@sets_app.command("get")
def tasksets_get(name: str, as_json: JsonOption = False) -> None:
    """A set's tasks by key, with the entries as last applied."""
    try:
        found = client().get(f"/api/v1/tasksets/{name}")
    except ApiError as exc:
        api_failed(exc, f"task set {name}")
    if as_json:
        emit(found)
        return
    out.print(f"task set {name}, version {found['version']}, applied {found['updated_at']}")
    for member in found["tasks"]:
        out.print(f"  {member['key']}  {member['id']}  {member['status']}", highlight=False)
    for member in found.get("workflows") or []:
        out.print(f"  {member['key']}  {member['id']}  workflow", highlight=False)


@sets_app.command("delete")
def tasksets_delete(
    name: str,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan alone.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    force: Annotated[bool, typer.Option(help="Also cancel running runs.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Cancel every task of a set and remove the set."""
    api = client()
    try:
        planned = api.delete(f"/api/v1/tasksets/{name}", dry_run="true")
        if not as_json:
            render.print_plan(out, planned)
        if dry_run:
            if as_json:
                emit(planned)
            return
        if not yes and not typer.confirm(f"Delete task set {name} and cancel its tasks?"):
            fail("nothing deleted")
        done = api.delete(f"/api/v1/tasksets/{name}", **({"force": "true"} if force else {}))
    except ApiError as exc:
        api_failed(exc, f"task set {name}")
    if as_json:
        emit(done)
        return
    deleted = len((done.get("workflows") or {}).get("delete", []))
    out.print(
        f"Deleted task set {name}: {len(done['delete'])} tasks cancelled, "
        f"{deleted} workflows deleted."
    )


@app.command()
def drift(name: str, as_json: JsonOption = False) -> None:
    """What changed outside the set since its last apply."""
    try:
        found = client().get(f"/api/v1/tasksets/{name}/drift")
    except ApiError as exc:
        api_failed(exc, f"task set {name}")
    if as_json:
        emit(found)
        return
    workflows = found.get("workflows") or []
    if not found["drift"] and not workflows:
        out.print(f"task set {name}: no drift")
    listed = [("", item) for item in found["drift"]] + [("workflow ", i) for i in workflows]
    for what, item in listed:
        if item["deleted"]:
            out.print(f"  [red]{what}{item['key']}: deleted outside the set[/red]")
        for field, values in item["fields"].items():
            kept = " (kept: ignore_changes)" if values["ignored"] else ""
            out.print(
                f"  [yellow]{what}{item['key']}[/yellow] {field}: declared "
                f"{render.compact(values['declared'])}, actual "
                f"{render.compact(values['actual'])}{kept}"
            )


@app.command()
def preview(
    expression: str,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone.")] = "UTC",
    count: Annotated[int, typer.Option(help="How many fire times.")] = 5,
    as_json: JsonOption = False,
) -> None:
    """The next fire times of a cron expression in a zone, as read there (and in UTC)."""
    zone = zone_of(tz)
    body = {"schedule": {"type": "cron", "expression": expression, "timezone": tz}, "count": count}
    try:
        found = client().post("/api/v1/schedules/preview", body)
    except ApiError as exc:
        api_failed(exc, "preview")
    if as_json:
        emit(found)
        return
    for at in found["next_runs"]:
        out.print(f"{render.local_time(at, zone)}  ({at})", highlight=False)


@tasks_app.command("ls")
def tasks_ls(
    status: Annotated[str | None, typer.Option(help="active, paused, completed, ...")] = None,
    health: Annotated[
        str | None, typer.Option(help="up, late, failing or overdue (the task's expectations)")
    ] = None,
    taskset: Annotated[str | None, typer.Option(help="One task set's tasks.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    tz: TzOption = None,
    as_json: JsonOption = False,
) -> None:
    """The tasks, newest first."""
    zone = zone_of(tz)
    query = {"status": status, "health": health, "taskset": taskset, "page_size": limit}
    try:
        page = client().get("/api/v1/tasks", **query)
    except ApiError as exc:
        api_failed(exc, "tasks ls")
    if as_json:
        emit(page["results"])
        return
    render.print_table(out, render.tasks_table(page["results"], zone))


@tasks_app.command("get")
def tasks_get(task_id: str, as_json: JsonOption = False) -> None:
    """One task."""
    show(f"/api/v1/tasks/{task_id}", as_json)


@runs_app.command("ls")
def runs_ls(
    task: Annotated[str | None, typer.Option(help="One task's runs.")] = None,
    status: Annotated[str | None, typer.Option(help="scheduled, running, failed, ...")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
    tz: TzOption = None,
    as_json: JsonOption = False,
) -> None:
    """The runs, newest occurrence first, each with its task's name."""
    zone = zone_of(tz)
    api = client()
    try:
        page = api.get("/api/v1/runs", task=task, status=status, page_size=limit)
    except ApiError as exc:
        api_failed(exc, "runs ls")
    if as_json:
        emit(page["results"])
        return
    render.print_table(
        out, render.runs_table(page["results"], task_names(api, page["results"]), zone)
    )


def task_names(api: Client, runs: list[dict[str, Any]]) -> dict[str, str]:
    """The name of each task the runs belong to, one request per task (a page has at most a
    page's worth); a task gone or unnamed shows by its id."""
    names = {}
    for task_id in dict.fromkeys(str(run.get("task")) for run in runs if run.get("task")):
        try:
            names[task_id] = api.get(f"/api/v1/tasks/{task_id}").get("name") or ""
        except ApiError:
            names[task_id] = ""
    return names


@runs_app.command("get")
def runs_get(run_id: str, as_json: JsonOption = False) -> None:
    """One run with its attempts, output and error."""
    show(f"/api/v1/runs/{run_id}", as_json)


def show(path: str, as_json: bool) -> None:
    try:
        found = client().get(path)
    except ApiError as exc:
        api_failed(exc, path)
    if as_json:
        emit(found)
        return
    out.print(render.fields_table(found))


def task_action(verb: str, help_text: str) -> None:
    def command(task_id: str, as_json: JsonOption = False) -> None:
        try:
            found = client().post(f"/api/v1/tasks/{task_id}/{verb}")
        except ApiError as exc:
            api_failed(exc, verb)
        if as_json:
            emit(found)
            return
        out.print(f"{verb}: {found.get('id')} {found.get('status', '')}".rstrip())

    command.__doc__ = help_text
    app.command(verb)(command)


task_action("pause", "Pause a task: no new runs until resumed.")
task_action("resume", "Resume a paused task.")
task_action("run-now", "One extra run of a task now.")
task_action("skip-next", "Skip a task's next occurrence.")


@app.command()
def cancel(
    task_id: str,
    force: Annotated[bool, typer.Option(help="Also cancel a running run.")] = False,
) -> None:
    """Cancel (delete) a task."""
    try:
        client().delete(f"/api/v1/tasks/{task_id}", **({"force": "true"} if force else {}))
    except ApiError as exc:
        api_failed(exc, "cancel")
    out.print(f"cancelled: {task_id}")
