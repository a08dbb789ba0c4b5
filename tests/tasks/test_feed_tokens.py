"""Feed tokens on a real PostgreSQL: made once per user even when two first uses race, replaced
by a rotation, and looked up only by the whole token."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

from tasks import feed_tokens
from tests.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_token_is_made_once_and_kept(user) -> None:
    token = feed_tokens.token_for(user.pk)
    assert len(token) == 43 and token == feed_tokens.token_for(user.pk)
    assert feed_tokens.create_token(user.pk) == token
    assert feed_tokens.owner_of(token) == user.pk


def test_two_first_uses_at_once_get_the_same_token(user) -> None:
    found: list[str] = []
    with psycopg.connect(database_url()) as other:
        # The other request's insert, not committed yet: ours waits on it, then keeps it.
        other.execute(
            "INSERT INTO tasks_calendarfeed (owner_id, token, created_at) VALUES (%s, %s, now())",
            [user.pk, "theirs"],
        )

        def first_use() -> None:
            try:
                found.append(feed_tokens.create_token(user.pk))
            finally:
                connection.close()

        racing = threading.Thread(target=first_use)
        racing.start()
        other.commit()
        racing.join()
    assert found == ["theirs"]


def test_a_rotation_replaces_the_token(user, other_user) -> None:
    old = feed_tokens.token_for(user.pk)
    theirs = feed_tokens.token_for(other_user.pk)
    new = feed_tokens.rotate(user.pk)
    assert new != old and feed_tokens.token_for(user.pk) == new
    assert feed_tokens.owner_of(old) is None and feed_tokens.owner_of(new) == user.pk
    assert feed_tokens.owner_of(theirs) == other_user.pk  # nobody else's changes
    assert feed_tokens.rotate(user.pk) not in (old, new)


def test_only_the_whole_token_opens_a_feed(user) -> None:
    token = feed_tokens.token_for(user.pk)
    for wrong in ("", token[:-1], token + "x", token.upper(), "%", "\x00", "x" * 10_000):
        assert feed_tokens.owner_of(wrong) is None, wrong
