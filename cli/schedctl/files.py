"""Task set files: YAML or JSON, one set (`name`, `tasks`, `workflows`?) or several under
`tasksets:`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class FileError(Exception):
    pass


@dataclass
class TaskSetFile:
    name: str
    tasks: list[dict[str, Any]]
    workflows: list[dict[str, Any]] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        """What PUT /api/v1/tasksets/{name} takes: the set whole (no workflows when none)."""
        return {"tasks": self.tasks, "workflows": self.workflows}


def read(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise FileError(f"{path}: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise FileError(f"{path}: {exc}") from None


def load(path: Path) -> list[TaskSetFile]:
    """The sets a file declares; the shape is checked here, the entries by the server (or by
    `validate`, against the JSON Schema)."""
    document = read(path)
    if not isinstance(document, dict):
        raise FileError(f"{path}: expected a mapping with `name` and `tasks`, or `tasksets`")
    listed = document["tasksets"] if "tasksets" in document else [document]
    if not isinstance(listed, list):
        raise FileError(f"{path}: `tasksets` must be a list of sets")
    found = []
    for index, item in enumerate(listed):
        where = f"tasksets[{index}]" if "tasksets" in document else "the file"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise FileError(f"{path}: {where} needs a `name`")
        if not isinstance(item.get("tasks"), list):
            raise FileError(f"{path}: {where} needs a list of `tasks`")
        if not isinstance(item.get("workflows", []), list):
            raise FileError(f"{path}: {where}: `workflows` must be a list")
        found.append(TaskSetFile(item["name"], item["tasks"], item.get("workflows", [])))
    return found
