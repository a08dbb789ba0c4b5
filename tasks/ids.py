"""Identifiers: time-ordered UUIDs (RFC 9562 version 7), so new rows land at the right edge of
the index, and the idempotency key of a run."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime


def uuid7() -> uuid.UUID:
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | rand & ((1 << 80) - 1)
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # RFC 4122 variant
    return uuid.UUID(int=value)


# A run's idempotency key (docs/schedules.md): its task and its nominal time, in microseconds.
# Its SQL twin is the fragment `idempotency_key` of tasks/sql/api_json.sql (a test holds the two
# equal).
def idempotency_key(task_id: uuid.UUID | str, scheduled_at: datetime) -> str:
    return f"{task_id}:{scheduled_at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
