"""The user of an identity provider's claims: found by (issuer, `sub`), created on first sight.

Both doors use it: the browser's sign-in (`accounts/backends.py`, claims of the ID token and
userinfo) and the API's bearer tokens (`scheduler_project/auth.py`, claims of the access token),
so a person is the same user whichever they used first.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from accounts.models import Identity
from accounts.teams import sync_team_groups

USERNAME_MAX = 150
# Django's username validator allows these; anything else in a claim is dropped.
NOT_IN_USERNAMES = re.compile(r"[^\w.@+-]")


class ClaimsRefused(Exception):
    """The claims name no usable subject."""


def user_for_claims(claims: dict[str, Any], *, issuer: str) -> Any:
    """The user of `claims` (created, with its Identity, the first time), its email and operator
    flags brought up to date. Two first sign-ins at once make one user: the loser of the unique
    (issuer, subject) constraint reads the winner's."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 255:
        raise ClaimsRefused("the token has no usable `sub` claim")
    identity = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject)
    found = identity.first()
    if found is None:
        try:
            with transaction.atomic():
                user = get_user_model().objects.create_user(
                    _free_username(claims, subject), email=_email(claims)
                )
                user.set_unusable_password()  # signs in through the provider only
                user.save(update_fields=["password"])
                found = Identity.objects.create(user=user, issuer=issuer, subject=subject)
        except IntegrityError:
            found = identity.first()  # the other sign-in's, committed
            if found is None:  # two new people wanted one username at once: try again
                raise

    user = found.user
    _update(user, claims)
    return user


def _update(user: Any, claims: dict[str, Any]) -> None:
    changed = []
    email = _email(claims)
    if email and email != user.email:
        user.email = email
        changed.append("email")
    group = settings.OIDC_OPERATOR_GROUP
    if group and settings.OIDC_GROUPS_CLAIM in claims:
        # The provider decides, at every sign-in: leaving the group ends operator rights. Claims
        # without the groups claim at all (many providers' access tokens) decide nothing.
        operator = group in _groups(claims)
        if user.is_staff != operator or user.is_superuser != operator:
            user.is_staff = user.is_superuser = operator
            changed += ["is_staff", "is_superuser"]
    if changed:
        user.save(update_fields=changed)
    mapping = settings.OIDC_TEAM_GROUPS
    if mapping and settings.OIDC_GROUPS_CLAIM in claims:
        # As for operators: the provider's groups decide the mapped teams, and claims without
        # the groups claim decide nothing.
        sync_team_groups(user, groups=_groups(claims), mapping=mapping)


def _groups(claims: dict[str, Any]) -> list[str]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _email(claims: dict[str, Any]) -> str:
    email = claims.get("email")
    return email if isinstance(email, str) and "@" in email and len(email) <= 254 else ""


def _free_username(claims: dict[str, Any], subject: str) -> str:
    """`preferred_username` (else the email, else `sub`), or that with a suffix made from
    `sub` when another user already has it: a new identity never takes over an account."""
    wanted = ""
    for claim in ("preferred_username", "email"):
        value = claims.get(claim)
        if isinstance(value, str) and NOT_IN_USERNAMES.sub("", value):
            wanted = NOT_IN_USERNAMES.sub("", value)
            break
    suffix = "-" + hashlib.sha256(subject.encode()).hexdigest()[:10]
    if not wanted:
        return f"oidc{suffix}"
    wanted = wanted[:USERNAME_MAX]
    users = get_user_model().objects
    if not users.filter(username=wanted).exists():
        return wanted
    return wanted[: USERNAME_MAX - len(suffix)] + suffix
