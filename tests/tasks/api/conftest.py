"""Fixtures of the task API tests: uploads in a temporary media root, helpers to create tasks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

HANDLER = {"kind": "handler", "payload": {"name": "noop"}}


@pytest.fixture(autouse=True)
def _isolated_settings(settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    # http payloads aimed at the loopback pass the SSRF guard without a DNS lookup.
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]


@pytest.fixture
def create(api: APIClient) -> Callable[..., dict]:
    """POST a task as `api`'s user (a noop handler unless told otherwise); return the body."""

    def _create(**body: object) -> dict:
        response = api.post("/api/v1/tasks", {**HANDLER, **body}, format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return _create
