"""Every change of a team: made, its members and their roles, its service accounts. The
callers (accounts/api/views.py) have checked the acting user's role (accounts/access.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

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
