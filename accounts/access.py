"""Which objects an identity may see and change: the one place that decides it. Every API view
and the admin's scoping (tasks/admin/scope.py) call it instead of filtering by owner. The API's
statements that write JSON state the same rule in SQL (tasks/sql/api_json.sql `visible_task`,
and the default task list's `visible_page_of_list`), held equal to `visible` by tests.

An object without a team is its owner's alone, as before teams. An object of a team is seen by
the team's members (404 for anyone else, as for another user's object) and changed by its
editors and admins (403 for a viewer). A service account is a user with a membership, so the
same rules hold for it; its token's scopes narrow them further (accounts/token_auth.py), never
widen them. Operators (staff) see everything in the admin; the API treats them as anyone else.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.db.models import Model, Q, QuerySet
from django.db.models.signals import post_delete, post_save
from django.http import Http404, HttpRequest, HttpResponse
from rest_framework.exceptions import PermissionDenied, ValidationError

from accounts.models import Membership, ServiceAccount, Team

VIEWER, EDITOR, ADMIN = Membership.Role.VIEWER, Membership.Role.EDITOR, Membership.Role.ADMIN
RANK: dict[str, int] = {VIEWER: 1, EDITOR: 2, ADMIN: 3}


def is_operator(user: Any) -> bool:
    """An operator (staff): sees everyone's objects in the admin and everyone's audit log."""
    return bool(user.is_active and user.is_staff)


def visible(queryset: QuerySet, user: Any, *, owner: str = "owner", team: str = "team") -> QuerySet:
    """`queryset` narrowed to what `user` may see: their own objects without a team, and every
    object of their teams. `owner` and `team` are the lookup paths of the two (a run's team is
    its task's: `team="task__team"`). The memberships are read once per request (not kept
    between requests: MembershipsPerRequest), so a membership removed is seen by the next
    request."""
    return queryset.filter(visible_q(user, owner=owner, team=team))


def visible_q(user: Any, *, owner: str = "owner", team: str = "team") -> Q:
    """The condition of `visible`, to combine with others (limit keys add the global ones).

    For a user in no team it is the owner's condition alone, as before teams: a list ordered
    and paged by an (owner, time) index stays a short read of that index, which an OR with the
    teams' rows would turn into reading and sorting all of the user's rows."""
    mine = Q(**{owner: user, f"{team}__isnull": True})
    teams = _team_ids(user)
    return mine | Q(**{f"{team}__in": teams}) if teams else mine


def _team_ids(user: Any) -> list[int]:
    return sorted(_roles(user))


# What the access rules read while a request is served: each user's memberships
# (("roles", user id): {team id: role}), a service account's default team (("default_team", user
# id)) and teams by slug (("team", slug)), each read once per request (a team member's task
# list asks for the memberships three times; a batch of 1,000 bodies asked for the default team
# 1,000 times). None outside a request: read on every call. A request never sees another's
# reads, so a membership removed is seen by the next request, as when nothing was kept.
_held: ContextVar[dict[tuple[str, Any], Any] | None] = ContextVar("memberships", default=None)


class MembershipsPerRequest:
    """Keeps the memberships (and teams) read while a request is served for that request
    alone."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _held.set({})
        try:
            return self.get_response(request)
        finally:
            _held.reset(token)


def _per_request(key: tuple[str, Any], read: Callable[[], Any]) -> Any:
    """`read()`, kept for the rest of the request under `key` (read on every call outside one)."""
    held = _held.get()
    if held is not None and key in held:
        return held[key]
    found = read()
    if held is not None:
        held[key] = found
    return found


def _roles(user: Any) -> dict[int, str]:
    """`user`'s role in each of their teams, {team id: role}: read once per request."""
    # No user at all while the schema is generated (drf-spectacular's fake views): no teams.
    user_id: Any = getattr(user, "pk", None)
    return _per_request(
        ("roles", user_id),
        lambda: dict(Membership.objects.filter(user_id=user_id).values_list("team_id", "role")),
    )


def _forget_memberships(**_: Any) -> None:
    # A membership, team or service account made, changed or removed while a request is served
    # (the team routes, a sign-in's groups): the request's later checks read them again.
    held = _held.get()
    if held is not None:
        held.clear()


for _model in (Membership, Team, ServiceAccount):
    post_save.connect(
        _forget_memberships, sender=_model, dispatch_uid=f"access_{_model.__name__}_saved"
    )
    post_delete.connect(
        _forget_memberships, sender=_model, dispatch_uid=f"access_{_model.__name__}_deleted"
    )


# Past this many teams a page is read as one OR (visible_page): a bound on the statement's
# parts (each one more plan node and index read), not a measured crossing point.
PAGE_PARTS_MAX = 16


def visible_page(
    queryset: QuerySet,
    user: Any,
    low: int,
    high: int,
    *,
    owner: str = "owner",
    team: str = "team",
) -> QuerySet:
    """Rows `low` to `high` of `queryset` (filtered and ordered, not yet narrowed) among what
    `user` may see: `visible(queryset, user)[low:high]`, read part by part for a member of teams:
    the first `high` rows, in the list's order, of the user's own objects without a team and of
    each of their teams apart (UNION ALL), then the page among those.

    Each part is one ordered read of an index that leads with its condition, (owner, ...) or
    (team, ...), when the list's order has one (tasks by `-created_at`: task_owner_created_id_idx,
    task_team_created_id_idx), stopping at `high` rows; the OR of `visible_q` is a bitmap read of
    every visible row, sorted whole for a page of 50 (bench/NOTEBOOK.md, "A team member's task
    list"). A user in no team, or in more than PAGE_PARTS_MAX, is read with the OR. The task list
    without a filter, in its default order, is read the same way by a named statement instead
    (tasks/sql/api_json.sql `visible_page_of_list`): no query to build per request."""
    parts = _parts(user, owner=owner, team=team)
    if parts is None:
        return visible(queryset, user, owner=owner, team=team)[low:high]
    ordering = queryset.query.order_by or queryset.model._meta.ordering
    firsts = [queryset.filter(part).order_by(*ordering).values("pk")[:high] for part in parts]
    return queryset.filter(pk__in=firsts[0].union(*firsts[1:], all=True))[low:high]


def visible_counted(
    queryset: QuerySet, user: Any, *, owner: str = "owner", team: str = "team"
) -> QuerySet:
    """The rows to count for `visible(queryset, user).count()` (`queryset` filtered, not yet
    narrowed), as a query of their primary keys: for a member of teams the rows of each part
    of `visible_page` (their own objects without a team, each team's), every one with all of
    `queryset`'s filters, UNION ALL. The parts are disjoint (a team's objects have that team,
    the user's own have none), so counting them is the sum of the parts' counts, each read by
    its own index: a team's rows from task_team_created_id_idx alone (no heap read when the list
    has no other filter), where the OR read every visible row through a bitmap of both indexes
    and the table (bench/NOTEBOOK.md, "The task list's count by parts"). A user in no team, or
    in more than PAGE_PARTS_MAX, is counted with the OR."""
    parts = _parts(user, owner=owner, team=team)
    if parts is None:
        return visible(queryset, user, owner=owner, team=team).order_by().values("pk")
    counted = [queryset.filter(part).order_by().values("pk") for part in parts]
    return counted[0].union(*counted[1:], all=True)


def _parts(user: Any, *, owner: str, team: str) -> list[Q] | None:
    """The disjoint conditions whose rows together are what `user` sees: their own objects
    without a team, then each of their teams'; None for a user in no team or in more than
    PAGE_PARTS_MAX (read with the OR of `visible_q`)."""
    teams = _team_ids(user)
    if not teams or len(teams) > PAGE_PARTS_MAX:
        return None
    return [Q(**{owner: user, f"{team}__isnull": True}), *(Q(**{team: one}) for one in teams)]


def changeable(
    queryset: QuerySet, user: Any, *, owner: str = "owner", team: str = "team"
) -> QuerySet:
    """`queryset` narrowed to what `user` may change: their own objects without a team, and
    the objects of the teams they are an editor or admin of (the admin's bulk actions)."""
    teams = Membership.objects.filter(user_id=user.pk, role__in=[EDITOR, ADMIN]).values("team_id")
    mine = Q(**{owner: user, f"{team}__isnull": True})
    return queryset.filter(mine | Q(**{f"{team}__in": teams}))


def role_in(user: Any, team_id: int | None) -> str | None:
    """`user`'s role in the team `team_id`, or None (no such team, or no member)."""
    if team_id is None:
        return None
    return _roles(user).get(team_id)


def require(user: Any, obj: Model, need: str = EDITOR, *, team_id: int | None = -1) -> None:
    """Refuse `user` acting on `obj` (an object they can see) with less than role `need`: 404
    when they cannot see it, 403 naming the role when they can but may not change it. A personal
    object needs its owner. `team_id` is the object's team when `obj` holds none itself (a
    run: its task's)."""
    team = getattr(obj, "team_id", None) if team_id == -1 else team_id
    if team is None:
        if getattr(obj, "owner_id", None) != user.pk:
            raise Http404("No such object.")
        return
    role = role_in(user, team)
    if role is None:
        raise Http404("No such object.")
    if RANK[role] < RANK[need]:
        raise PermissionDenied(
            f"Your role in this object's team is {role}; this needs {need}.", code="role"
        )


def team_for(user: Any, slug: str | None, *, need: str = EDITOR) -> Team | None:
    """The team named `slug` for an object `user` puts in it (None: no team): 400 naming
    `team` when they are no member of it (unknown and foreign teams alike), 403 when their role
    is less than `need`."""
    if slug is None:
        return None
    found = _per_request(("team", slug), lambda: Team.objects.filter(slug=slug).first())
    role = role_in(user, found.pk) if found is not None else None
    if found is None or role is None:
        raise ValidationError({"team": [f"No team {slug!r} among yours."]}, code="invalid")
    if RANK[role] < RANK[need]:
        raise PermissionDenied(
            f"Your role in team {slug!r} is {role}; this needs {need}.", code="role"
        )
    return found


def require_move(user: Any, obj: Model, team: Team | None) -> None:
    """Moving `obj` to `team` (None: out of any) needs editor rights in both teams; out of a
    team only its owner may take it (it becomes theirs alone)."""
    current = getattr(obj, "team_id", None)
    target = team.pk if team is not None else None
    if current == target:
        return
    if current is not None:
        require(user, obj, EDITOR)
    if team is None and getattr(obj, "owner_id", None) != user.pk:
        raise PermissionDenied("Only the owner may take an object out of its team.", code="role")
    if team is not None:
        team_for(user, team.slug, need=EDITOR)


def placed(user: Any, obj: Model | None, slug: str | None) -> Team | None:
    """The team an object created (`obj` None) or changed by `user` is put in by its body's
    `"team": slug`: checked for the team's editors (and, for a move, the old team's)."""
    team = team_for(user, slug)
    if obj is not None:
        require_move(user, obj, team)
    return team


def place(user: Any, obj: Model | None, data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a validated body) with its `team` slug, if it has one, replaced by the team
    (`placed`); a service account's new object without one goes to its team."""
    if "team" in data:
        data["team"] = placed(user, obj, data["team"])
    elif obj is None and (own := default_team(user)) is not None:
        data["team"] = placed(user, None, own.slug)
    return data


def default_team(user: Any) -> Team | None:
    """The team a service account's objects belong to when a body names none (a machine has no
    space of its own that a person could see); None for a person."""

    def read() -> Team | None:
        account = ServiceAccount.objects.filter(user_id=user.pk).select_related("team").first()
        return account.team if account is not None else None

    return _per_request(("default_team", user.pk), read)
