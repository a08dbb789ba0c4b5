"""Every change of a team: made, its members and their roles, its service accounts. The
callers (accounts/api/views.py) have checked the acting user's role (accounts/access.py).

Each change records its audit entry (tasks/audit.py) in its own transaction, as the team's:
every member reads it in `GET /api/v1/audit?team=<slug>`, nobody outside the team does."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.access import RANK
from accounts.models import Membership, ServiceAccount, Team
from tasks import audit


class LastAdmin(Exception):
    """The change would leave the team without an admin."""


def create_team(*, creator: Any, slug: str, name: str) -> Team:
    """A new team whose creator is its first admin."""
    with transaction.atomic():
        team = Team.objects.create(slug=slug, name=name)
        Membership.objects.create(team=team, user=creator, role=Membership.Role.ADMIN)
        audit.record(team_entry("create", team, {"name": name, "admin": creator.get_username()}))
    return team


def team_entry(action: str, team: Team, changes: dict[str, Any]) -> audit.Entry:
    """The audit entry of `action` on `team` itself (its members, its creation): the team's,
    no one's own."""
    return audit.Entry(
        action=action,
        object_type="team",
        object_id=str(team.pk),
        object_name=team.slug,
        changes=changes,
        team_id=team.pk,
    )


def member_entry(team: Team, user: Any, before: str | None, after: str | None) -> audit.Entry:
    """The entry of `user`'s role in `team` going from `before` to `after` (None: no member)."""
    action = "add_member" if before is None else "remove_member" if after is None else "change_role"
    return team_entry(action, team, {"member": user.get_username(), "role": [before, after]})


def set_member(*, team: Team, user: Any, role: str) -> tuple[Membership, bool]:
    """Add `user` to `team` with `role`, or change their role; (membership, added). Taking the
    last admin's role refuses with LastAdmin. Serialised per team on its row."""
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=team.pk)
        found = Membership.objects.filter(team=team, user=user).first()
        if found is None:
            audit.record(member_entry(team, user, None, role))
            return Membership.objects.create(team=team, user=user, role=role), True
        if role == found.role:
            return found, False
        if found.role == Membership.Role.ADMIN:
            _keep_an_admin(team, found)
        audit.record(member_entry(team, user, found.role, role))
        found.role = role
        found.save(update_fields=["role"])
        return found, False


def remove_member(*, team: Team, membership: Membership) -> None:
    """Take `membership`'s user out of `team` (LastAdmin for its last admin); they lose its
    objects at their next request."""
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=team.pk)
        if membership.role == Membership.Role.ADMIN:
            _keep_an_admin(team, membership)
        audit.record(member_entry(team, membership.user, membership.role, None))
        membership.delete()


def _keep_an_admin(team: Team, leaving: Membership) -> None:
    if is_last_admin(leaving):
        raise LastAdmin("A team keeps at least one admin.")


def is_last_admin(membership: Membership) -> bool:
    """Whether `membership` is its team's only admin (taking its role away would leave none)."""
    if membership.role != Membership.Role.ADMIN:
        return False
    admins = Membership.objects.filter(team_id=membership.team_id, role=Membership.Role.ADMIN)
    return not admins.exclude(pk=membership.pk).exists()


def person_named(username: str) -> Any:
    """The active person (not a service account) of `username`, who may join a team; or None."""
    found = get_user_model().objects.filter(username=username, is_active=True).first()
    return None if found is None or hasattr(found, "service_account") else found


def create_service_account(*, team: Team, name: str, role: str) -> ServiceAccount:
    """A machine identity of `team`: a user of its own (no password, never staff: it signs in
    with its tokens only) holding `role` in the team."""
    with transaction.atomic():
        user = get_user_model().objects.create(username=f"{name}@{team.slug}.service")
        user.set_unusable_password()
        user.save(update_fields=["password"])
        Membership.objects.create(team=team, user=user, role=role)
        account = ServiceAccount.objects.create(user=user, team=team, name=name)
        audit.record(
            audit.Entry(
                action="create",
                object_type="service_account",
                object_id=str(account.pk),
                object_name=name,
                changes={"user": user.get_username(), "role": [None, role]},
                team_id=team.pk,
            )
        )
        return account


def sync_team_groups(user: Any, *, groups: list[str], mapping: dict[str, tuple[str, str]]) -> None:
    """Set `user`'s memberships of the teams `mapping` names ({group: (team slug, role)}) to the
    highest role their provider `groups` give, removing those none gives; teams the mapping
    does not name are left alone. Writes nothing when nothing changes (it runs on every
    provider token)."""
    wanted: dict[str, str] = {}
    for group in groups:
        if group in mapping:
            slug, role = mapping[group]
            if RANK[role] > RANK.get(wanted.get(slug, ""), 0):
                wanted[slug] = role
    managed = {slug for slug, _ in mapping.values()}
    held = {
        slug: (pk, role)
        for pk, slug, role in Membership.objects.filter(
            user=user, team__slug__in=managed
        ).values_list("pk", "team__slug", "role")
    }
    gone = [pk for slug, (pk, _) in held.items() if slug not in wanted]
    changes = {slug: role for slug, role in wanted.items() if held.get(slug, (0, ""))[1] != role}
    if not gone and not changes:
        return
    entries: list[audit.Entry] = []
    with transaction.atomic():
        for membership in Membership.objects.filter(pk__in=gone).select_related("team"):
            entries.append(_by_groups(member_entry(membership.team, user, membership.role, None)))
            membership.delete()
        for slug, role in changes.items():
            team, made = Team.objects.get_or_create(slug=slug)
            if made:
                entries.append(_by_groups(team_entry("create", team, {"name": ""})))
            Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
            entries.append(_by_groups(member_entry(team, user, held.get(slug, (0, None))[1], role)))
        audit.record_all(entries)


def _by_groups(entry: audit.Entry) -> audit.Entry:
    # A change the provider's groups made (at sign-in, with no actor yet): the entry says so.
    return replace(entry, changes={**entry.changes, "source": "groups"})
