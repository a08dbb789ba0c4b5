"""The audit log: the vocabulary of actions, who is acting, and recording an entry.

Every change a person or a machine makes is recorded by the transition that makes it, in the
transaction that makes it: a change rolled back leaves no entry, and every path (the API,
`schedctl` through it, the admin, task-set apply, the seed routes) is recorded by the same
call. The scheduler, workers and reviewer record nothing: they act on their own.

    action          object                      recorded by
    create          task, calendar, channel,    creation.create_task(s), calendars, limits.declare,
                    concurrency_key, rate_key   notifications.services
    update          the same                    lifecycle.update_tasks (a field diff), calendars,
                                                limits.set_limits, notifications.services
    delete          calendar, channel, taskset  calendars.delete_calendar,
                                                notifications.services.delete_channel,
                                                tasksets.delete_taskset
    cancel          task                        lifecycle.cancel_tasks
    pause, resume   task                        lifecycle.pause_task, resume_task
    run_now         task                        lifecycle.run_now (the run's id in `changes`)
    skip_next       task                        lifecycle.skip_next
    backfill        task                        backfill.backfill (range and count)
    cancel_run      run                         run_actions.cancel_run
    retry           run                         run_actions.retry_run
    taskset_apply   taskset                     tasksets.apply_taskset (what it changed)
    rotate          calendar_feed               feed_tokens.rotate (the token itself never)
    delete          task, run, notification,    the admin, an operator's delete
                    concurrency_key, rate_key
    bulk_resend     notification                the admin's resend (notifications/admin.py)
    bulk_<verb>     task, run                   the admin's actions on selected rows
                                                (admin/actions.py) and on all rows matching a
                                                filter (admin/bulk.py):
                                                the filter and the count, beside each row's own
    create          team, service_account       accounts.teams.create_team (the first admin),
                                                create_service_account (its role)
    add_member,     team                        accounts.teams.set_member, remove_member and
    change_role,                                sync_team_groups (the provider's groups): the
    remove_member                               member, and the role as [before, after]
    create_token    token                       accounts.tokens.make_token (its account, scopes
                                                and expiry; the token's text and hash never)
    revoke_token    token                       accounts.tokens.revoke

Whose entry it is: the object's owner and its team at the time of the change (a run's and a
notification's team is its task's). A team's members read its entries, a personal object's
entries are its owner's (accounts/access.py, as for the objects); a bulk action's one entry
is its actor's, with no team (its rows may be several teams'), beside each row's own entry.
A team's own changes (its members, service accounts and tokens) are the team's entries, with
no owner: every member reads them, nobody outside the team does.

Who acts comes from `AuditContextMiddleware` (one per request, in a contextvar): the signed-in
user as DRF or the session authenticated them (with a service token, its account and the
token's id), the client address and the user agent. A command line sets its own actor with
`acting` (`manage.py ops`). With no actor set, an entry names nobody.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.contrib.auth.models import AnonymousUser
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.http import HttpRequest, HttpResponse

from accounts.models import ApiToken
from scheduler_project.sql import queries
from tasks.models import Task

ACTIONS = (
    "create",
    "update",
    "delete",
    "cancel",
    "pause",
    "resume",
    "run_now",
    "skip_next",
    "backfill",
    "cancel_run",
    "retry",
    "taskset_apply",
    "rotate",
    # The admin's actions on many rows, one entry for all (beside each row's own entry).
    "bulk_pause",
    "bulk_resume",
    "bulk_run_now",
    "bulk_skip_next",
    "bulk_cancel",
    "bulk_retry",
    "bulk_resend",
    # Teams, their members, service accounts and tokens (accounts/teams.py, accounts/tokens.py).
    "add_member",
    "change_role",
    "remove_member",
    "create_token",
    "revoke_token",
)
OBJECT_TYPES = (
    "task",
    "run",
    "calendar",
    "channel",
    "concurrency_key",
    "rate_key",
    "taskset",
    "calendar_feed",
    "notification",
    "team",
    "service_account",
    "token",
)

USER_AGENT_MAX = 500  # characters kept of a user agent

SQL = queries("tasks", "audit.sql")


@dataclass
class Actor:
    """Who is acting: a request (its user read when an entry is recorded, after
    authentication), or a command line by `name`."""

    request: HttpRequest | None = None
    service_account: str = ""
    token_id: str = ""
    name: str = ""


_actor: ContextVar[Actor | None] = ContextVar("audit_actor", default=None)


class AuditContextMiddleware:
    """Makes the request the actor of every entry recorded while it is served."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _actor.set(Actor(request=request))
        try:
            return self.get_response(request)
        finally:
            _actor.reset(token)


@contextmanager
def acting(actor: Actor) -> Iterator[Actor]:
    """Record as `actor` inside the block (a command line, a test)."""
    token = _actor.set(actor)
    try:
        yield actor
    finally:
        _actor.reset(token)


@dataclass(frozen=True)
class Entry:
    """One entry to record: the action on one object."""

    action: str
    object_type: str
    object_id: str
    object_name: str = ""
    owner_id: int | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    team_id: int | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS or self.object_type not in OBJECT_TYPES:
            raise ValueError(f"not in the audit vocabulary: {self.action} {self.object_type}")


def entry(action: str, object_type: str, obj: Any, changes: dict[str, Any] | None = None) -> Entry:
    """The entry of `action` on a model instance (its pk, its name, its owner, its team)."""
    return Entry(
        action=action,
        object_type=object_type,
        object_id=str(obj.pk),
        object_name=str(getattr(obj, "name", "") or obj)[:500],
        owner_id=getattr(obj, "owner_id", None),
        changes=changes or {},
        team_id=team_of(obj),
    )


def team_of(obj: Any) -> int | None:
    """The team of a model instance: its own `team_id`, else its task's (a run, a
    notification: one read of the task), else None (a calendar feed is its owner's alone)."""
    if hasattr(obj, "team_id"):
        return obj.team_id
    task_id = getattr(obj, "task_id", None)
    if task_id is None:
        return None
    return Task.objects.filter(pk=task_id).values_list("team_id", flat=True).first()


def bulk_entry(
    verb: str, object_type: str, *, user: Any, filter: dict[str, Any], count: int, refused: int
) -> Entry:
    """The one entry of an admin action on many rows: which rows (`filter`: the list's query,
    or the rows ticked), how many it changed and how many it could not. The acting user is the
    entry's owner: the rows may be several users' (an operator's), each row's entry is theirs."""
    changes = {"filter": filter, "count": count, "refused": refused}
    return Entry(
        action=f"bulk_{verb}",
        object_type=object_type,
        object_id="",
        object_name=f"{count} {object_type}s",
        owner_id=user.pk,
        changes=changes,
    )


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """{field: [before, after]} of the fields whose value differs."""
    return {
        name: [before.get(name), after[name]] for name in after if before.get(name) != after[name]
    }


def record(*entries: Entry) -> None:
    """Record `entries` as done by the current actor, in one INSERT (`audit.sql`). Call inside
    the transaction of the change, so that it commits or rolls back with it."""
    record_all(entries)


def record_all(entries: Iterable[Entry]) -> None:
    """`record` for an iterable of entries."""
    rows = [
        {
            "action": one.action,
            "object_type": one.object_type,
            "object_id": one.object_id,
            "object_name": one.object_name,
            "owner_id": one.owner_id,
            "team_id": one.team_id,
            "changes": _changes_json(one.changes),
        }
        for one in entries
    ]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.execute(SQL["insert"], {**_who(), "entries": _entries_json(rows)})


def _entries_json(rows: list[dict[str, Any]]) -> str:
    # One JSON parameter: seven text arrays were dumped element by element by the driver, a
    # twelfth of the batch route's CPU for 1,000 tasks. What orjson refuses (a lone surrogate)
    # goes to the standard library's encoder, whose text PostgreSQL refuses as the arrays' was.
    try:
        return orjson.dumps(rows).decode()
    except orjson.JSONEncodeError:
        return json.dumps(rows)


def _changes_json(changes: dict[str, Any]) -> str:
    # A create's entry has none: the encoder's setup per entry was a tenth of the batch route's
    # audit for 1,000 tasks.
    if type(changes) is dict and not changes:
        return "{}"
    return json.dumps(changes, cls=DjangoJSONEncoder)


def _who() -> dict[str, Any]:
    actor = _actor.get() or Actor()
    who: dict[str, Any] = {
        "actor_id": None,
        "actor_name": actor.name,
        "service_account": actor.service_account,
        "token_id": actor.token_id,
        "client_address": None,
        "user_agent": "",
    }
    request = actor.request
    if request is None:
        return who
    user = getattr(request, "user", None)
    if user is not None and not isinstance(user, AnonymousUser) and user.pk is not None:
        who["actor_id"] = user.pk
        who["actor_name"] = user.get_username()
    # A service token (accounts/token_auth.py) is the request's `auth`, which DRF sets on
    # the Django request too: the entry names its account and the token's id.
    token = getattr(request, "auth", None)
    if isinstance(token, ApiToken):
        who["service_account"] = f"{token.account.team.slug}/{token.account.name}"
        who["token_id"] = str(token.pk)
    who["client_address"] = _address(request.META.get("REMOTE_ADDR", ""))
    who["user_agent"] = request.META.get("HTTP_USER_AGENT", "")[:USER_AGENT_MAX]
    return who


def _address(value: str) -> str | None:
    # What the server says, when it is an address (a unix socket gives none): never a value
    # that would make the entry's INSERT, and so the change, fail.
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None
