"""bench day's seed spreads the daily tasks over the day's minutes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from bench import day_seed


@pytest.mark.django_db(transaction=True)  # the seed ends with VACUUM ANALYZE
def test_the_daily_tasks_fire_at_many_minutes_of_the_day() -> None:
    seeded = day_seed.seed(
        tasks=1000,
        t0=datetime.now(UTC),
        seconds=1440,
        channel="00000000-0000-0000-0000-000000000000",
    )

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT next_unplanned_at) FROM tasks_task"
            " WHERE owner_id = %s AND name LIKE 'daily %%'",
            [seeded.owner],
        )
        daily, instants = cursor.fetchone()
    # 987 tasks drawn over 1,440 one-second minutes: about 710 distinct ones (one, before).
    assert daily == seeded.daily == 987
    assert instants > 500, instants
