"""Errors raised by task services; the API maps them onto status codes in one place."""

from __future__ import annotations


class TasksError(Exception):
    status_code = 400
    code = "invalid"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class Conflict(TasksError):
    """The change collides with the task's current state (e.g. a run in flight)."""

    status_code = 409
    code = "conflict"
