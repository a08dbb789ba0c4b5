"""JWT auth: the token endpoints, and 401 on every protected route without a valid token."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from tasks.models import Task
from tests.factories import TaskFactory

SOME_ID = uuid.uuid4()
API_ENDPOINTS = [
    ("get", "/api/v1/tasks"),
    ("post", "/api/v1/tasks"),
    ("get", f"/api/v1/tasks/{SOME_ID}"),
    ("patch", f"/api/v1/tasks/{SOME_ID}"),
    ("put", f"/api/v1/tasks/{SOME_ID}"),
    ("delete", f"/api/v1/tasks/{SOME_ID}"),
    ("post", f"/api/v1/tasks/{SOME_ID}/pause"),
    ("post", f"/api/v1/tasks/{SOME_ID}/resume"),
    ("post", f"/api/v1/tasks/{SOME_ID}/run-now"),
    ("post", f"/api/v1/tasks/{SOME_ID}/skip-next"),
    ("get", f"/api/v1/tasks/{SOME_ID}/runs"),
    ("get", f"/api/v1/runs/{SOME_ID}"),
    ("post", f"/api/v1/runs/{SOME_ID}/cancel"),
    ("post", f"/api/v1/runs/{SOME_ID}/retry"),
    ("post", "/api/v1/schedules/preview"),
]
SEED_ENDPOINTS = [
    ("post", "/task"),
    ("put", "/task"),
    ("get", f"/task?id={SOME_ID}"),
    ("delete", f"/task?id={SOME_ID}"),
    ("put", "/task/status"),
    ("get", f"/task/{SOME_ID}"),
    ("put", f"/task/{SOME_ID}"),
    ("delete", f"/task/{SOME_ID}"),
    ("get", "/tasks"),
]


def test_token_pair_for_good_credentials(anon: APIClient, user) -> None:
    response = anon.post(
        "/api/v1/auth/token",
        {"username": user.username, "password": "password-123"},
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert body["access"] and body["refresh"]
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {body['access']}")
    assert anon.get("/api/v1/tasks").status_code == 200


@pytest.mark.parametrize(
    "credentials",
    [
        {"password": "wrong-password"},
        {"username": "nobody-at-all"},
    ],
)
def test_token_refused_for_wrong_credentials(anon: APIClient, user, credentials: dict) -> None:
    body = {"username": user.username, "password": "password-123"} | credentials

    response = anon.post("/api/v1/auth/token", body, format="json")

    assert response.status_code == 401
    assert "access" not in response.json()


def test_refresh_gives_a_working_access_token(anon: APIClient, user) -> None:
    pair = anon.post(
        "/api/v1/auth/token",
        {"username": user.username, "password": "password-123"},
        format="json",
    ).json()

    response = anon.post("/api/v1/auth/token/refresh", {"refresh": pair["refresh"]}, format="json")

    assert response.status_code == 200
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['access']}")
    assert anon.get("/api/v1/tasks").status_code == 200


def test_refresh_refuses_a_garbage_token(anon: APIClient, db) -> None:
    response = anon.post("/api/v1/auth/token/refresh", {"refresh": "garbage"}, format="json")

    assert response.status_code == 401


def test_an_access_token_is_not_a_refresh_token(anon: APIClient, user) -> None:
    pair = anon.post(
        "/api/v1/auth/token",
        {"username": user.username, "password": "password-123"},
        format="json",
    ).json()

    response = anon.post("/api/v1/auth/token/refresh", {"refresh": pair["access"]}, format="json")

    assert response.status_code == 401


@pytest.mark.parametrize(("method", "path"), API_ENDPOINTS + SEED_ENDPOINTS)
def test_no_token_is_401(anon: APIClient, db, method: str, path: str) -> None:
    response = getattr(anon, method)(path, {}, format="json")

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize(("method", "path"), API_ENDPOINTS + SEED_ENDPOINTS)
def test_garbage_token_is_401(anon: APIClient, db, method: str, path: str) -> None:
    anon.credentials(HTTP_AUTHORIZATION="Bearer not.a.jwt")

    response = getattr(anon, method)(path, {}, format="json")

    assert response.status_code == 401


def test_token_of_a_deleted_user_is_401(api: APIClient, user) -> None:
    user.delete()

    assert api.get("/api/v1/tasks").status_code == 401


def test_unauthenticated_create_writes_nothing(anon: APIClient, db) -> None:
    anon.post("/api/v1/tasks", {"kind": "handler", "payload": {"name": "noop"}}, format="json")

    assert not Task.objects.exists()


def test_unauthenticated_delete_leaves_the_task(anon: APIClient, db) -> None:
    task = TaskFactory()

    assert anon.delete(f"/api/v1/tasks/{task.id}").status_code == 401
    task.refresh_from_db()
    assert task.status == "active"
