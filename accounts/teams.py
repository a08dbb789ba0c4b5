"""Every change of a team: made, its members and their roles, its service accounts. The
callers (accounts/api/views.py) have checked the acting user's role (accounts/access.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.access import RANK
from accounts.models import Membership, ServiceAccount, Team


class LastAdmin(Exception):
    """The change would leave the team without an admin."""


def create_team(*, creator: Any, slug: str, name: str) -> Team:
    """A new team whose creator is its first admin."""
    with transaction.atomic():
        team = Team.objects.create(slug=slug, name=name)
        Membership.objects.create(team=team, user=creator, role=Membership.Role.ADMIN)
    return team


def set_member(*, team: Team, user: Any, role: str) -> tuple[Membership, bool]:
    """Add `user` to `team` with `role`, or change their role; (membership, added). Taking the
    last admin's role refuses with LastAdmin. Serialised per team on its row."""
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=team.pk)
        found = Membership.objects.filter(team=team, user=user).first()
        if found is None:
            return Membership.objects.create(team=team, user=user, role=role), True
        if found.role == Membership.Role.ADMIN and role != found.role:
            _keep_an_admin(team, found)
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
        membership.delete()


def _keep_an_admin(team: Team, leaving: Membership) -> None:
    others = Membership.objects.filter(team=team, role=Membership.Role.ADMIN).exclude(pk=leaving.pk)
    if not others.exists():
        raise LastAdmin("A team keeps at least one admin.")


def create_service_account(*, team: Team, name: str, role: str) -> ServiceAccount:
    """A machine identity of `team`: a user of its own (no password, never staff: it signs in
    with its tokens only) holding `role` in the team."""
    with transaction.atomic():
        user = get_user_model().objects.create(username=f"{name}@{team.slug}.service")
        user.set_unusable_password()
        user.save(update_fields=["password"])
        Membership.objects.create(team=team, user=user, role=role)
        return ServiceAccount.objects.create(user=user, team=team, name=name)


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
    with transaction.atomic():
        Membership.objects.filter(pk__in=gone).delete()
        for slug, role in changes.items():
            team, _ = Team.objects.get_or_create(slug=slug)
            Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
