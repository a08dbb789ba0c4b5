"""Delivering the outbox: claim due notifications, send them, record sent / retry / failed."""

from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction

from notifications.exceptions import NotificationsError
from notifications.messages import build_message
from notifications.models import Channel, Notification
from notifications.transports.base import TransportError, TransportSettings, get_transport
from scheduler_project.sql import queries
from tasks import audit
from tasks.db import prepared_cursor
from tasks.models import Attempt
from tasks.outbox import NOTIFICATION_CHANNEL

logger = logging.getLogger(__name__)

# Configuration keys stored encrypted; the API never returns them.
SECRET_FIELDS = frozenset({"secret", "webhook_url", "token"})
CHANNEL_FIELDS = ("name", "all_tasks_events", "team")

# The claim (a lease, at least once) and the fenced record: notifications/sql/delivery.sql.
SQL = queries("notifications", "delivery.sql")


@dataclass(frozen=True)
class Result:
    notification: Notification
    ok: bool
    error: str = ""
    permanent: bool = False


def transport_settings() -> TransportSettings:
    """The deployment settings the transports use, read from Django settings at call time."""
    return TransportSettings(
        outbound_allow=tuple(settings.SCHEDULER_OUTBOUND_ALLOW),
        timeout_seconds=settings.SCHEDULER_OUTBOUND_TIMEOUT_SECONDS,
        slack_api_base_url=settings.SCHEDULER_SLACK_API_URL,
        default_from_email=settings.DEFAULT_FROM_EMAIL,
    )


def retry_delay(attempts: int, *, rng: random.Random | None = None) -> float:
    """Seconds before the next try after `attempts` failed ones: base * 2**(n-1), capped, with
    up to a quarter taken off at random so a receiver coming back is not hit in lock-step."""
    base = settings.NOTIFICATIONS_RETRY_BASE_SECONDS
    ceiling = min(settings.NOTIFICATIONS_RETRY_CAP_SECONDS, base * 2 ** min(attempts - 1, 30))
    return ceiling * (rng or random).uniform(0.75, 1.0)


def claim(*, limit: int, now: datetime) -> dict[UUID, int]:
    """Claim up to `limit` due pending notifications; returns {id: attempt number}. One
    statement: in autocommit its own transaction."""
    # Every deliverer claims on every NOTIFY of the channel, mostly finding nothing: prepared, so
    # the statement is planned once per connection, not on each wake-up (bench/NOTEBOOK.md,
    # "Planned once per connection").
    with prepared_cursor() as cursor:
        lease = settings.NOTIFICATIONS_LEASE_SECONDS
        cursor.execute(SQL["claim"], {"now": now, "limit": limit, "lease": lease})
        return dict(cursor.fetchall())


def deliver_pending(*, limit: int, now: datetime, stopping: threading.Event | None = None) -> int:
    """Deliver up to `limit` notifications due at `now`; returns how many were claimed.

    Any number of deliverers may run at once (SKIP LOCKED plus the lease): in normal operation
    each notification is sent once. Sent rows become `sent`; a transient failure is retried
    (first within NOTIFICATIONS_RETRY_BASE_SECONDS, doubling up to the cap) until its
    `retry_until`, then marked `failed` with the last error; a permanent one fails at once.
    Once `stopping` is set no further send starts: the rows not tried are given back, due at
    once for another deliverer, so a shutdown waits for the sends in flight only.
    """
    claimed = claim(limit=limit, now=now)
    if not claimed:
        return 0
    rows = list(
        Notification.objects.select_related(
            "channel", "run", "task", "workflow_run__workflow", "workflow"
        ).filter(id__in=claimed)
    )
    attempts: dict[tuple[Any, int], Attempt] = {
        (a.run_id, a.number): a
        for a in Attempt.objects.filter(
            run_id__in={n.run_id for n in rows}, number__in={n.attempt for n in rows}
        )
    }
    options = transport_settings()
    stop = stopping or threading.Event()
    jobs = [(n, attempts.get((n.run_id, n.attempt)), options, stop) for n in rows]
    workers = min(settings.NOTIFICATIONS_DELIVERY_CONCURRENCY, len(jobs))
    started = time.monotonic()
    if workers <= 1:
        results = [_send(*job) for job in jobs]
    else:
        # Sends are network-bound; one slow receiver must not hold up the rest of the batch.
        with ThreadPoolExecutor(workers, thread_name_prefix="notify-send") as pool:
            results = list(pool.map(lambda job: _send(*job), jobs))
    tried = [result for result in results if result is not None]
    _record(tried, claimed=claimed, now=now + timedelta(seconds=time.monotonic() - started))
    _release([job[0] for job, result in zip(jobs, results, strict=True) if result is None], claimed)
    return len(claimed)


def _send(
    notification: Notification,
    attempt: Attempt | None,
    options: TransportSettings,
    stopping: threading.Event,
) -> Result | None:
    """The outcome of one send; None when the deliverer is stopping and did not try."""
    if stopping.is_set():
        return None
    try:
        message = build_message(
            notification, attempt=attempt, public_url=settings.SCHEDULER_PUBLIC_URL
        )
        channel = notification.channel
        get_transport(channel.kind).send(channel.transport_config(), message, settings=options)
    except TransportError as exc:
        return Result(notification, ok=False, error=exc.message, permanent=exc.permanent)
    except NotificationsError as exc:  # a key missing or rotated out: the operator can fix it
        return Result(notification, ok=False, error=exc.detail)
    except Exception as exc:  # a bug must not stop the other deliveries; retried like transient
        logger.exception("notification=%s delivery raised", notification.id)
        return Result(notification, ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
    return Result(notification, ok=True)


def _record(results: list[Result], *, claimed: dict[UUID, int], now: datetime) -> None:
    values: dict[str, list[Any]] = {
        k: [] for k in ("ids", "attempts", "statuses", "sent_at", "next_at", "errors")
    }
    for result in results:
        n = result.notification
        attempt = claimed[n.id]
        until = n.retry_until or n.created_at + timedelta(
            seconds=settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS
        )
        # A settled row keeps next_attempt_at = when it was settled, not the claim's lease.
        if result.ok:
            status, sent_at, next_at, outcome = "sent", now, now, "sent"
        elif result.permanent or now >= until:
            status, sent_at, next_at, outcome = "failed", None, now, "failed"
        else:
            delay = timedelta(seconds=retry_delay(attempt))
            status, sent_at, next_at = "pending", None, min(now + delay, until)
            outcome = f"retry in {(next_at - now).total_seconds():.1f}s"
        values["ids"].append(n.id)
        values["attempts"].append(attempt)
        values["statuses"].append(status)
        values["sent_at"].append(sent_at)
        values["next_at"].append(next_at)
        values["errors"].append(result.error[:1000])
        logger.info(
            "notification=%s channel=%s event=%s run=%s attempt=%d outcome=%s%s",
            n.id,
            n.channel_id,
            n.event,
            n.run_id or n.workflow_run_id or n.workflow_id,
            attempt,
            outcome,
            f" error={result.error[:200]!r}" if result.error else "",
        )
    with prepared_cursor() as cursor:
        cursor.execute(SQL["record"], values)


def _release(untried: list[Notification], claimed: dict[UUID, int]) -> None:
    if not untried:
        return
    logger.info("stopping: %d claimed notifications given back untried", len(untried))
    with prepared_cursor() as cursor:
        cursor.execute(
            SQL["release"],
            {"ids": [n.id for n in untried], "attempts": [claimed[n.id] for n in untried]},
        )


def seconds_until_next_due() -> float | None:
    """Seconds (database clock) until the earliest pending notification may be tried."""
    with prepared_cursor() as cursor:  # after every wake-up of every deliverer, as the claim
        cursor.execute(SQL["seconds_until_next_due"], {})
        return cursor.fetchall()[0][0]


def resend(*, ids: list[Any], now: datetime) -> int:
    """Queue notifications again now (admin `resend`), with a fresh retry window; returns how
    many. Their attempt count carries on, so the log shows every try."""
    window = timedelta(seconds=settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS)
    with transaction.atomic():
        count = Notification.objects.filter(id__in=ids).update(
            status=Notification.Status.PENDING, next_attempt_at=now, retry_until=now + window
        )
        if count:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, '')", [NOTIFICATION_CHANNEL])
    return count


def _apply_config(channel: Channel, config: dict[str, Any]) -> None:
    public = {k: v for k, v in config.items() if k not in SECRET_FIELDS}
    if channel.kind == Channel.Kind.SLACK and config.get("webhook_url"):
        # The path of an incoming-webhook URL is its credential; only the host is shown.
        public["webhook_host"] = urlsplit(config["webhook_url"]).hostname or ""
    channel.config = public
    channel.set_secrets({k: v for k, v in config.items() if k in SECRET_FIELDS})


def create_channel(*, owner: Any, data: dict[str, Any]) -> Channel:
    """Create a channel from validated data (`config` holds public and secret keys together);
    secrets are encrypted before the row is written."""
    channel = Channel(owner=owner, kind=data["kind"])
    for field in CHANNEL_FIELDS:
        if field in data:
            setattr(channel, field, data[field])
    _apply_config(channel, data["config"])
    with transaction.atomic():
        channel.save()
        audit.record(audit.entry("create", "channel", channel))
    return channel


def shown(channel: Channel) -> dict[str, Any]:
    """What the audit log shows of a channel: its fields and public config, never a secret."""
    fields = {field: getattr(channel, field) for field in CHANNEL_FIELDS}
    return {**fields, "owner": channel.owner_id, "config": channel.config}


def record_change(channel: Channel, was: dict[str, Any], *, secret_changed: bool = False) -> None:
    """The audit entry of a change of `channel` (saved) from `was` (`shown` before)."""
    changes: dict[str, Any] = audit.diff(was, shown(channel))
    if secret_changed:
        changes["secret_changed"] = [None, True]
    audit.record(audit.entry("update", "channel", channel, changes))


def update_channel(*, channel: Channel, data: dict[str, Any]) -> Channel:
    """Apply a validated PATCH; a changed configuration is re-encrypted with the current key."""
    was, secret = shown(channel), channel.secret_config
    for field in CHANNEL_FIELDS:
        if field in data:
            setattr(channel, field, data[field])
    if "config" in data:
        _apply_config(channel, data["config"])
    with transaction.atomic():
        channel.save()
        record_change(channel, was, secret_changed=channel.secret_config != secret)
    return channel


def delete_channel(*, channel: Channel) -> None:
    """Delete the channel and its delivery log; tasks naming it simply stop notifying it."""
    with transaction.atomic():
        audit.record(audit.entry("delete", "channel", channel))
        channel.delete()
