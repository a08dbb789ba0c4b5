"""A multipart upload takes every field a JSON body takes, the compound ones as JSON text."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

FIELDS = {
    "concurrency": {"key": "db", "limit": 2, "scope": "owner"},
    "rate_limit": {"key": "crm", "limit": 5, "per": 60, "scope": "owner"},
    "retry_backoff": {"base": 3.0, "cap": 90.0},
}


@pytest.mark.parametrize("route", ["/api/v1/tasks", "/api/v1/tasks/upload"])
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_upload_takes_the_field_as_json_text(api: APIClient, route: str, field: str) -> None:
    body = {
        "kind": "executable",
        "file": SimpleUploadedFile("job.sh", b"#!/bin/sh\ntrue\n"),
        field: json.dumps(FIELDS[field]),
    }

    response = api.post(route, body, format="multipart")

    assert response.status_code == 201, response.content
    assert response.json()[field] == FIELDS[field]
