"""A token's user is read once per SCHEDULER_AUTH_USER_CACHE_SECONDS per process, and a
deactivated user is refused once that many seconds have passed. A token's validation is
remembered by its exact text until it expires."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework_simplejwt.tokens import AccessToken

from scheduler_project.auth import clear_user_cache

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_user_cache()
    yield
    clear_user_cache()


def _user_queries(anon, token: str) -> tuple[int, int]:
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    with CaptureQueriesContext(connection) as captured:
        status = anon.get("/api/v1/tasks").status_code
    return status, sum('FROM "auth_user"' in q["sql"] for q in captured.captured_queries)


def test_the_user_is_read_once_then_deactivation_takes_effect_within_the_window(
    anon, user, settings
) -> None:
    settings.SCHEDULER_AUTH_USER_CACHE_SECONDS = 0.5
    token = str(AccessToken.for_user(user))
    assert _user_queries(anon, token) == (200, 1)
    assert _user_queries(anon, token) == (200, 0)  # from the cache

    user.is_active = False
    user.save(update_fields=["is_active"])
    started = time.monotonic()
    while _user_queries(anon, token)[0] == 200:
        assert time.monotonic() - started < 0.5 + 0.2, "still accepted after the window"
        time.sleep(0.05)
    assert _user_queries(anon, token) == (401, 1)  # a refusal is not cached


def test_zero_reads_the_user_on_every_request(anon, user, settings) -> None:
    settings.SCHEDULER_AUTH_USER_CACHE_SECONDS = 0
    token = str(AccessToken.for_user(user))
    assert _user_queries(anon, token) == (200, 1)
    user.delete()
    assert _user_queries(anon, token)[0] == 401


def test_the_default_window_is_five_seconds(settings) -> None:
    from scheduler_project import settings as project_settings

    assert project_settings.SCHEDULER_AUTH_USER_CACHE_SECONDS == 5.0


def _status(anon, token: str) -> int:
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return anon.get("/api/v1/tasks").status_code


def test_a_remembered_token_still_expires(anon, user) -> None:
    token = AccessToken.for_user(user)
    # `exp` is whole seconds: a 1-second lifetime can leave a few milliseconds, too few for the
    # second request under load. 3 s leaves 2 to 3; the test then waits until `exp` has passed.
    token.set_exp(lifetime=timedelta(seconds=3))
    text = str(token)
    assert _status(anon, text) == 200
    assert _status(anon, text) == 200  # the remembered validation
    time.sleep(max(0.0, token["exp"] - time.time()) + 1.1)
    assert _status(anon, text) == 401


def test_a_token_is_remembered_only_by_its_exact_text(anon, user, other_user) -> None:
    text = str(AccessToken.for_user(user))
    assert _status(anon, text) == 200
    head, claims, signature = text.split(".")
    # Another user's claims under the remembered signature: a new text, validated and refused.
    forged = AccessToken.for_user(other_user)
    forged_claims = str(forged).split(".")[1]
    assert _status(anon, f"{head}.{forged_claims}.{signature}") == 401
    assert _status(anon, f"{head}.{claims}.{signature[:-2]}AA") == 401


def test_validation_is_done_once_per_token(anon, user, monkeypatch) -> None:
    from rest_framework_simplejwt.backends import TokenBackend

    decoded: list[str] = []
    original = TokenBackend.decode

    def counting(self, token, verify=True):
        decoded.append(token.decode() if isinstance(token, bytes) else token)
        return original(self, token, verify)

    monkeypatch.setattr(TokenBackend, "decode", counting)
    first, second = str(AccessToken.for_user(user)), str(AccessToken.for_user(user))
    for text in (first, first, second, first, second):
        assert _status(anon, text) == 200
    assert decoded == [first, second]
