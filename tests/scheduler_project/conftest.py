"""Fixtures of the project package's tests: a real gunicorn, for the tests that serve HTTP."""

from __future__ import annotations

from tests.gunicorn_server import gunicorn  # noqa: F401  (a fixture, used by name)
