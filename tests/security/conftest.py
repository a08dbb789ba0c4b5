"""Fixtures of the security tests: the ops tests' real gunicorn, shared here."""

from __future__ import annotations

from tests.ops.conftest import gunicorn  # noqa: F401  (a fixture, used by name)
