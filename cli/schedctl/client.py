"""The REST API over requests: bearer auth (an access token, or one refreshed from the stored
refresh token), every call with a timeout, API errors as ApiError with the fields' paths."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from typing import Any

import requests

from schedctl.config import Settings

TIMEOUT_SECONDS = 30


def user_agent() -> str:
    """`schedctl/<version> python-requests/<version>`: the service's audit log shows which
    changes came from the command line."""
    try:
        version = metadata.version("schedctl")
    except metadata.PackageNotFoundError:  # run from a checkout, not installed
        version = "dev"
    return f"schedctl/{version} {requests.utils.default_user_agent()}"


class ApiError(Exception):
    """An answer >= 400 (or no answer): `problems` are (field path, message) pairs."""

    def __init__(self, status: int | None, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in problems))
        self.status = status
        self.problems = problems


def field_paths(errors: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """DRF's nested errors as paths: `{"tasks": {"3": {"schedule": {"expression": [m]}}}}` is
    `("tasks[3].schedule.expression", m)`."""
    if isinstance(errors, dict):
        if prefix == "" and set(errors) <= {"detail", "code"} and "detail" in errors:
            yield "", str(errors["detail"])
            return
        for key, value in errors.items():
            key = str(key)
            if key.isdigit():
                path = f"{prefix}[{key}]"
            else:
                path = f"{prefix}.{key}" if prefix else key
            yield from field_paths(value, path)
    elif isinstance(errors, list):
        for index, value in enumerate(errors):
            if isinstance(value, (dict, list)):
                yield from field_paths(value, f"{prefix}[{index}]")
            else:
                yield prefix, str(value)
    else:
        yield prefix, str(errors)


class Client:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.session = requests.Session()
        self.session.headers["User-Agent"] = user_agent()
        self._access = settings.token

    def _token(self) -> str | None:
        if self._access is None and self.settings.refresh:
            answer = self._send(
                "POST",
                "/api/v1/auth/token/refresh",
                auth=False,
                json={"refresh": self.settings.refresh},
            )
            self._access = answer["access"]
        return self._access

    def _send(self, method: str, path: str, *, auth: bool = True, **kwargs: Any) -> Any:
        headers = {"Accept": "application/json"}
        token = self._token() if auth else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        url = self.settings.url + path
        try:
            response = self.session.request(
                method, url, headers=headers, timeout=TIMEOUT_SECONDS, **kwargs
            )
        except requests.RequestException as exc:
            raise ApiError(None, [("", f"cannot reach {self.settings.url}: {exc}")]) from None
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": f"HTTP {response.status_code}: {response.text[:200]}"}
            raise ApiError(response.status_code, list(field_paths(body)))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get(self, path: str, **params: Any) -> Any:
        return self._send("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        return self._send("POST", path, json=body)

    def put(self, path: str, body: Any, **params: Any) -> Any:
        return self._send("PUT", path, json=body, params=params)

    def delete(self, path: str, **params: Any) -> Any:
        return self._send("DELETE", path, params=params)

    def login(self, username: str, password: str) -> dict[str, str]:
        body = {"username": username, "password": password}
        return self._send("POST", "/api/v1/auth/token", auth=False, json=body)
