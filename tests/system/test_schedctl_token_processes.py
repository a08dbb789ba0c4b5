"""`schedctl apply` in a CI pipeline: a team's service account token in SCHEDCTL_TOKEN, against
a real gunicorn on 127.0.0.1, no login and no password."""

from __future__ import annotations

import pytest
import requests

from accounts.models import Team
from tasks.models import Task
from tests.factories import UserFactory
from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)
from tests.system.test_schedctl_processes import runner, task, write

pytestmark = pytest.mark.processes


def made_token(base: str, scopes: list[str]) -> str:
    """A token of the service account `ci` of team `data`, made by its admin through the API."""
    UserFactory(username="lead")
    body = {"username": "lead", "password": "password-123"}
    access = requests.post(f"{base}/api/v1/auth/token", json=body, timeout=10).json()["access"]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {access}"
    assert session.post(f"{base}/api/v1/teams", json={"slug": "data"}, timeout=10).ok
    accounts = f"{base}/api/v1/teams/data/service-accounts"
    assert session.post(accounts, json={"name": "ci"}, timeout=10).status_code == 201
    answer = session.post(
        f"{accounts}/ci/tokens", json={"name": "pipeline", "scopes": scopes}, timeout=10
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["token"]


def test_apply_with_a_tasksets_apply_token(gunicorn, tmp_path) -> None:  # noqa: F811
    base = gunicorn(workers=2)
    text = made_token(base, ["tasksets:apply"])
    schedctl = runner(tmp_path, SCHEDULER_URL=base, SCHEDCTL_TOKEN=text)
    path = write(tmp_path / "schedules.yaml", [task("report", "0 3 * * *")])

    applied = schedctl("apply", "-f", str(path), "--yes")
    assert applied.returncode == 0, applied.stderr
    [made] = Task.objects.filter(taskset__name="nightly")
    assert made.team == Team.objects.get(slug="data")  # the account's team's set and task
    assert made.schedule["expression"] == "0 3 * * *"

    # The same token may not change a task outside a set: `write` is not among its scopes.
    refused = schedctl("pause", str(made.pk))
    assert refused.returncode != 0
    assert "run" in refused.stderr or "run" in refused.stdout


def test_apply_with_a_read_token_is_refused_naming_the_scope(gunicorn, tmp_path) -> None:  # noqa: F811
    base = gunicorn(workers=2)
    schedctl = runner(tmp_path, SCHEDULER_URL=base, SCHEDCTL_TOKEN=made_token(base, ["read"]))
    path = write(tmp_path / "schedules.yaml", [task("report", "0 3 * * *")])
    refused = schedctl("apply", "-f", str(path), "--yes")
    assert refused.returncode != 0
    assert "tasksets:apply" in refused.stderr + refused.stdout
    assert not Task.objects.exists()
