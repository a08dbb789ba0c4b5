"""`schedctl` with a task set file's `workflows:` entries, as a subprocess against a real gunicorn:
validated offline, planned, applied, and a workflow changed or deleted outside the set found
by `diff --exit-code` and `drift`, then applied back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tasks.models import Workflow
from tests.conftest import free_port
from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)
from tests.system.test_schedctl_processes import runner, served, task  # noqa: F401

pytestmark = pytest.mark.processes

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
ETL = {
    "key": "etl",
    "steps": [
        {"id": "extract", "task": NOOP},
        {"id": "load", "after": ["extract"], "task": NOOP},
    ],
}


def write(path: Path, workflows: list[dict]) -> Path:
    document = {"name": "nightly", "tasks": [task("report", "0 3 * * *")], "workflows": workflows}
    path.write_text(yaml.safe_dump(document))
    return path


def test_validate_checks_workflow_entries_offline(tmp_path) -> None:
    schedctl = runner(tmp_path, SCHEDULER_URL=f"http://127.0.0.1:{free_port()}")
    assert schedctl("validate", "-f", str(write(tmp_path / "good.yaml", [ETL]))).returncode == 0
    refused = schedctl("validate", "-f", str(write(tmp_path / "bad.yaml", [{**ETL, "stpes": []}])))
    assert refused.returncode == 1
    assert "workflows[0]" in refused.stderr and "'stpes' was unexpected" in refused.stderr


def test_plan_apply_drift_and_apply_back(served, tmp_path) -> None:  # noqa: F811
    _, schedctl = served
    path = write(tmp_path / "schedules.yaml", [ETL])
    planned = schedctl("plan", "-f", str(path))
    assert planned.returncode == 0, planned.stderr
    assert "+ create workflow etl (2 steps)" in planned.stdout
    assert "Workflows: 1 to create, 0 to update, 0 to delete, 0 unchanged." in planned.stdout
    assert not Workflow.objects.exists()

    applied = schedctl("apply", "-f", str(path), "--yes")
    assert applied.returncode == 0, applied.stderr
    workflow = Workflow.objects.get()
    assert (workflow.name, workflow.taskset_key) == ("etl", "etl")
    assert schedctl("diff", "-f", str(path), "--exit-code").returncode == 0
    listed = schedctl("tasksets", "get", "nightly")
    assert f"etl  {workflow.pk}  workflow" in listed.stdout

    Workflow.objects.filter(pk=workflow.pk).update(name="by hand")
    differs = schedctl("diff", "-f", str(path), "--exit-code")
    assert differs.returncode == 2
    assert "~ update workflow etl" in differs.stdout
    assert 'name: "by hand" -> "etl"' in differs.stdout
    assert (
        'workflow etl name: declared "etl", actual "by hand"' in schedctl("drift", "nightly").stdout
    )

    workflow_id = str(workflow.pk)
    workflow.delete()
    drift = json.loads(schedctl("drift", "nightly", "--json").stdout)
    assert drift["workflows"] == [{"key": "etl", "id": workflow_id, "deleted": True, "fields": {}}]
    assert "workflow etl: deleted outside the set" in schedctl("drift", "nightly").stdout
    assert schedctl("apply", "-f", str(path), "--yes").returncode == 0
    assert Workflow.objects.get().name == "etl"
    assert schedctl("diff", "-f", str(path), "--exit-code").returncode == 0

    write(path, [])
    removal = schedctl("apply", "-f", str(path), "--yes")
    assert removal.returncode == 0, removal.stderr
    assert "- delete workflow etl" in removal.stdout
    assert not Workflow.objects.exists()
