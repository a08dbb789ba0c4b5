"""Calendar feed tokens: the secret in a feed's URL (`?token=`), one per user.

Calendar apps fetch a subscribed URL on their own, without an Authorization header, so the
`.ics` feeds take this token instead of a JWT. It is made on first use (the first task read or
`GET /calendar-feed`), is kept as it is so that the task view can show the URL at any time
(docs/security.md, "Calendar feeds"), and is replaced by a rotation: the old URLs then answer
404.
"""

from __future__ import annotations

import secrets

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks import audit
from tasks.models import CalendarFeed

TOKEN_BYTES = 32  # 256 random bits, 43 URL-safe characters
TOKEN_MAX_LENGTH = 64  # the column's length


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


SQL = queries("tasks", "feed_tokens.sql")


def create_token(owner_id: int) -> str:
    """The owner's token, made now if they have none: on the primary, so it is read back
    whichever request made it."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["create"], {"owner": owner_id, "token": new_token()})
        cursor.execute("SELECT token FROM tasks_calendarfeed WHERE owner_id = %s", [owner_id])
        return cursor.fetchone()[0]


def token_for(owner_id: int) -> str:
    """The owner's token (read where reads go, the replica for a GET), made if none."""
    found = CalendarFeed.objects.filter(owner_id=owner_id).values_list("token", flat=True)
    return found.first() or create_token(owner_id)


def rotate(owner_id: int) -> str:
    """A new token for the owner, replacing the old one in one statement: from its commit on,
    the old token finds nothing."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["rotate"], {"owner": owner_id, "token": new_token()})
        token = cursor.fetchone()[0]
        audit.record(
            audit.Entry("rotate", "calendar_feed", str(owner_id), "calendar feed", owner_id)
        )
        return token


def owner_of(token: str) -> int | None:
    """The user whose feed `token` opens, or None (no such token, or not one we make)."""
    if not token or len(token) > TOKEN_MAX_LENGTH or "\x00" in token:
        return None  # PostgreSQL refuses NUL in text: not ours, not an error
    return CalendarFeed.objects.filter(token=token).values_list("owner_id", flat=True).first()
