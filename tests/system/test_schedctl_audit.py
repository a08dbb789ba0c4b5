"""`schedctl apply` against a real gunicorn on 127.0.0.1: the apply and the task changes it
makes are in GET /api/v1/audit as the signed-in user's, from the client's address, with the
command line's user agent and the field diff."""

from __future__ import annotations

import pytest
import requests

from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)
from tests.system.test_schedctl_processes import served, task, write  # noqa: F401

pytestmark = pytest.mark.processes


def test_an_apply_through_schedctl_is_in_the_audit_log(served, tmp_path) -> None:  # noqa: F811
    base, schedctl = served
    path = write(tmp_path / "schedules.yaml", [task("report", "0 3 * * *")])
    assert schedctl("apply", "-f", str(path), "--yes").returncode == 0
    write(path, [task("report", "30 3 * * *")])
    changed = schedctl("apply", "-f", str(path), "--yes")
    assert changed.returncode == 0, changed.stderr

    token = requests.post(
        f"{base}/api/v1/auth/token",
        json={"username": "ops", "password": "password-123"},
        timeout=10,
    ).json()["access"]
    answer = requests.get(
        f"{base}/api/v1/audit", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    entries = answer.json()["results"]

    assert [(e["action"], e["object"]["type"]) for e in entries] == [
        ("taskset_apply", "taskset"),
        ("update", "task"),
        ("taskset_apply", "taskset"),
        ("create", "task"),
    ]
    for entry in entries:
        assert entry["actor"]["username"] == "ops"
        assert entry["client_address"] == "127.0.0.1"
        assert entry["user_agent"].startswith("schedctl/"), entry["user_agent"]
    before, after = entries[1]["changes"]["schedule"]
    assert (before["expression"], after["expression"]) == ("0 3 * * *", "30 3 * * *")
    assert entries[0]["changes"] == {"version": 2, "created": 0, "updated": 1, "cancelled": 0}
