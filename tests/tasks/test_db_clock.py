"""Where a worker's monotonic clock stands against the database clock (tasks/db.py,
`DatabaseClock`): a claim's time is anchored as tightly as the statements' answers allow, never
before the instant the database read it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.db import connection

from tasks.db import DatabaseClock
from tasks.transitions import claim

TAIL_SECONDS = 0.05


def read_at(offset: float, mono: float) -> datetime:
    """The database time `offset` seconds ahead of monotonic instant `mono`."""
    return datetime.fromtimestamp(mono + offset, UTC)


def test_a_claim_alone_is_anchored_at_its_answer() -> None:
    clock = DatabaseClock()
    assert clock.instant(read_at(1000.0, 5.0), 5.2) == pytest.approx(5.2)


def test_an_earlier_tighter_reading_anchors_a_claim_before_its_answer() -> None:
    clock = DatabaseClock(drift=0.0)
    clock.observe(read_at(1000.0, 4.0), 4.0)  # a read-only answer, right after its reading
    # A claim read the clock at 5.0 and was answered at 5.2 (its tail and commit).
    assert clock.instant(read_at(1000.0, 5.0), 5.2) == pytest.approx(5.0)


def test_old_readings_count_less_and_expire() -> None:
    clock = DatabaseClock(keep=2.0, drift=0.01)
    clock.observe(read_at(1000.0, 4.0), 4.0)
    # Answered 1.2 s after it, the claim takes the reading as 12 ms less tight.
    assert clock.instant(read_at(1000.0, 5.0), 5.2) == pytest.approx(5.012)
    # Past `keep`, only the claim's own answer is left.
    assert clock.instant(read_at(1000.0, 7.0), 7.2) == pytest.approx(7.2)


def test_a_lost_connection_forgets_the_readings() -> None:
    clock = DatabaseClock(drift=0.0)
    clock.observe(read_at(1000.0, 4.0), 4.0)
    clock.forget()
    assert clock.instant(read_at(1000.0, 5.0), 5.2) == pytest.approx(5.2)


@pytest.mark.django_db
def test_a_statement_read_before_a_slow_tail_is_anchored_within_it() -> None:
    clock = DatabaseClock()
    claim.seconds_until_next_due(clock=clock)  # the idle worker's question: the clock read last
    with connection.cursor() as cursor:
        sent = time.monotonic()
        # The clock read first, then a tail the statement spends after it, as a claim's
        # triggers and commit come after its clock_timestamp().
        cursor.execute("SELECT clock_timestamp(), pg_sleep(%s)", [TAIL_SECONDS])
        read = cursor.fetchone()[0]
        answered = time.monotonic()
    anchor = clock.instant(read, answered)
    assert sent <= anchor, "anchored before the statement was sent: a run would start early"
    assert anchor <= answered - TAIL_SECONDS * 0.8, "the tail after the reading was not seen"
