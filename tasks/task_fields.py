"""A task's fields, defined once: the body a client sends, the columns it is stored in, and the
body a stored task reads back as (docs/api.md, Tasks).

Every entry point takes its list from here: the API's JSON and multipart bodies, the batch and
seed routes, task sets (what they compare and what drift shows) and the admin's task form.
tests/tasks/test_task_fields_paths.py sends every field through every one of them.
"""

from __future__ import annotations

from typing import Any

from tasks.models import Task
from tasks.occurrences import shown_schedule

# Every field of a task's body, in the order docs/api.md lists them.
BODY_FIELDS = (
    "name",
    "dedup_key",
    "kind",
    "payload",
    "schedule",
    "priority",
    "max_attempts",
    "retry_backoff",
    "timeout",
    "notify",
    "resources",
    "concurrency",
    "rate_limit",
    "on_zombie",
    "expect",
    "team",
)
# The fields a multipart form carries as JSON text: their values are objects or lists.
JSON_TEXT_FIELDS = (
    "payload",
    "schedule",
    "retry_backoff",
    "notify",
    "resources",
    "concurrency",
    "rate_limit",
    "expect",
)
# `null` clears these (to null, or to `{}` for an object); any other field refuses it, in a
# create and in a PATCH or PUT alike (a create's `schedule: null` is its default, once now).
NULL_CLEARS = ("dedup_key", "timeout", "resources", "concurrency", "rate_limit", "expect", "team")
# The columns a create or an update writes straight from the validated body; `retry_backoff`
# is two of them. `dedup_key` and `schedule` are a create's (an update re-plans a schedule);
# `concurrency` and `rate_limit` also name a key row (limits.resolve_task_keys resolves it).
COLUMNS = (
    "name",
    "kind",
    "payload",
    "priority",
    "max_attempts",
    "retry_backoff_base",
    "retry_backoff_cap",
    "timeout",
    "notify",
    "resources",
    "on_zombie",
    "expect",
    "team",
)
# The body fields whose value is an object the task shows as null when it is empty.
OPTIONAL_OBJECTS = ("concurrency", "rate_limit")


def body_of(task: Task, *, shown: bool = True) -> dict[str, Any]:
    """The task's fields as GET /api/v1/tasks/{id} shows them (tasks/api/json_sql.py writes the
    same; a test holds the two equal). `shown=False` keeps the schedule as stored, without the
    deployment's default misfire grace filled in (what task sets compare)."""
    body: dict[str, Any] = {
        name: getattr(task, name) for name in BODY_FIELDS if name not in ("retry_backoff", "team")
    }
    body["team"] = task.team.slug if task.team is not None else None  # as the API shows it
    body["retry_backoff"] = {"base": task.retry_backoff_base, "cap": task.retry_backoff_cap}
    for name in OPTIONAL_OBJECTS:
        body[name] = body[name] or None
    if shown:
        body["schedule"] = shown_schedule(task.schedule)
    return body


def stored(name: str, value: Any) -> dict[str, Any]:
    """The validated data of one field's value as a task shows it (`body_of`): what an update
    takes to set it back."""
    if name == "retry_backoff":
        return {"retry_backoff_base": value["base"], "retry_backoff_cap": value["cap"]}
    if name in OPTIONAL_OBJECTS:
        return {name: value or {}}
    return {name: value}


def unsaved_task(data: dict[str, Any]) -> Task:
    """A Task holding validated `data` as a create would (the model's defaults for the rest),
    with no key resolved and nothing read or written: what a task set's plan compares."""
    task = Task(schedule=data["schedule"], dedup_key=data.get("dedup_key"))
    for name in (*COLUMNS, *OPTIONAL_OBJECTS):
        if name in data:
            setattr(task, name, data[name])
    return task


def changed(task: Task, data: dict[str, Any]) -> dict[str, Any]:
    """The validated `data` of an update without what would leave `task` as it is, so a task
    read and PUT back changes nothing and plans nothing again. A schedule is the same when it
    shows the same (the default misfire grace sent back stays the default)."""
    result: dict[str, Any] = {}
    for name, value in data.items():
        if name == "schedule":
            same = shown_schedule(value) == shown_schedule(task.schedule)
        elif name == "executable":
            same = value is None
        else:
            same = hasattr(task, name) and getattr(task, name) == value
        if not same:
            result[name] = value
    return result
