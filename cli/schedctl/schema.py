"""`validate`: a task set file against the JSON Schema shipped here (taskset.schema.json, the
copy of what the service serves at /api/v1/tasksets/schema), offline; and its cron expressions
against the service's own parser (schedule_cron.py, a copy of tasks/schedule_cron.py), which no
JSON Schema can state: `61 * * * *` is a string of the right shape."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from schedctl.schedule_cron import CronSyntaxError, parse_cron


@cache
def validator() -> Draft202012Validator:
    text = resources.files("schedctl").joinpath("taskset.schema.json").read_text()
    return Draft202012Validator(json.loads(text))


def _path(parts: Any) -> str:
    shown = ""
    for part in parts:
        shown += f"[{part}]" if isinstance(part, int) else (f".{part}" if shown else str(part))
    return shown or "(the file)"


def _explain(error: ValidationError) -> ValidationError:
    """A oneOf names no branch; the one meant is the branch whose `type` (a schedule's) the
    entry has, else the one it got furthest into, as a person reads the file."""
    while error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        meant = [
            errors
            for errors in branches.values()
            if not any(
                (sub.validator == "type" and not sub.relative_path)
                or list(sub.relative_path)[:1] == ["type"]
                for sub in errors
            )
        ]
        depth = {id(e): max(len(sub.relative_path) for sub in e) for e in meant}
        deepest = max(depth.values(), default=0)
        meant = [errors for errors in meant if depth[id(errors)] == deepest]
        if len(meant) != 1:
            return best_match([error])
        error = best_match(meant[0])
    return error


def cron_problem(expression: str, *, allow_every_second: bool) -> str | None:
    """What the service says of a cron expression it refuses (tasks/schedule_fields.py), or
    None when it takes it."""
    try:
        spec = parse_cron(" ".join(expression.split()))
    except CronSyntaxError as exc:
        return str(exc)
    if not spec.can_fire():
        return "This expression never fires: no month has that day."
    if spec.every_second() and not allow_every_second:
        return (
            'This expression fires every second; if that is meant, add "allow_every_second": '
            "true to the schedule."
        )
    return None


def _cron_problems(document: Any) -> list[tuple[str, str]]:
    sets = document.get("tasksets") if isinstance(document, dict) else None
    listed = [(f"tasksets[{i}].", s) for i, s in enumerate(sets)] if isinstance(sets, list) else []
    if not listed:
        listed = [("", document)]
    found = []
    for prefix, one in listed:
        entries = one.get("tasks") if isinstance(one, dict) else None
        for index, entry in enumerate(entries if isinstance(entries, list) else []):
            schedule = entry.get("schedule") if isinstance(entry, dict) else None
            where = f"{prefix}tasks[{index}].schedule"
            expression: Any
            if isinstance(schedule, str):  # a bare string is a cron expression
                expression, every_second = schedule, False
            elif isinstance(schedule, dict) and schedule.get("type") == "cron":
                expression, where = schedule.get("expression"), f"{where}.expression"
                every_second = schedule.get("allow_every_second") is True
            else:
                continue
            if isinstance(expression, str) and expression.strip():
                message = cron_problem(expression, allow_every_second=every_second)
                if message:
                    found.append((where, message))
    return found


def problems(document: Any) -> list[tuple[str, str]]:
    """(path, message) for each way `document` breaks the schema, e.g.
    `("tasksets[0].tasks[1]", "Additional properties are not allowed ('priorty' ...)")`, or
    has a cron expression the service refuses."""
    found = []
    for error in validator().iter_errors(document):
        deepest = _explain(error)
        found.append((_path(deepest.absolute_path), deepest.message))
    return sorted(set(found) | set(_cron_problems(document)))
