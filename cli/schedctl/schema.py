"""`validate`: a task set file against the JSON Schema shipped here (taskset.schema.json, the
copy of what the service serves at /api/v1/tasksets/schema), offline."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match


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


def problems(document: Any) -> list[tuple[str, str]]:
    """(path, message) for each way `document` breaks the schema, e.g.
    `("tasksets[0].tasks[1]", "Additional properties are not allowed ('priorty' ...)")`."""
    found = []
    for error in validator().iter_errors(document):
        deepest = _explain(error)
        found.append((_path(deepest.absolute_path), deepest.message))
    return sorted(set(found))
