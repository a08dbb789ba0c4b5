"""Claims to users: `sub` is the key, a username is never a way into another account."""

from __future__ import annotations

import pytest

from accounts.identities import ClaimsRefused, user_for_claims
from accounts.models import Identity
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
ISSUER = "https://login.example.com/"


def test_first_sign_in_creates_the_user_from_the_claims() -> None:
    user = user_for_claims(
        {"sub": "a1", "preferred_username": "alice", "email": "alice@example.com"}, issuer=ISSUER
    )

    assert (user.username, user.email) == ("alice", "alice@example.com")
    assert not user.has_usable_password()
    assert not user.is_staff
    assert Identity.objects.get(user=user).subject == "a1"


def test_the_same_subject_is_the_same_user_whatever_its_name_now() -> None:
    first = user_for_claims({"sub": "a1", "preferred_username": "alice"}, issuer=ISSUER)
    again = user_for_claims(
        {"sub": "a1", "preferred_username": "alice.renamed", "email": "new@example.com"},
        issuer=ISSUER,
    )

    assert again.pk == first.pk
    assert again.email == "new@example.com"
    assert Identity.objects.count() == 1


def test_a_taken_username_is_not_linked_to_the_new_identity() -> None:
    local = UserFactory(username="admin", is_staff=True, is_superuser=True)

    user = user_for_claims({"sub": "evil", "preferred_username": "admin"}, issuer=ISSUER)

    assert user.pk != local.pk
    assert user.username.startswith("admin-")
    assert not user.is_superuser


def test_another_issuers_subject_is_another_person() -> None:
    one = user_for_claims({"sub": "1", "preferred_username": "sam"}, issuer=ISSUER)
    other = user_for_claims({"sub": "1", "preferred_username": "sam"}, issuer="https://b/")

    assert one.pk != other.pk


def test_the_operator_group_makes_and_unmakes_an_operator(settings) -> None:
    settings.OIDC_OPERATOR_GROUP = "ops"
    claims = {"sub": "o1", "preferred_username": "olga", "groups": ["dev", "ops"]}

    assert user_for_claims(claims, issuer=ISSUER).is_superuser
    left = user_for_claims({**claims, "groups": ["dev"]}, issuer=ISSUER)
    assert not left.is_staff and not left.is_superuser


def test_claims_without_groups_leave_an_operator_as_is(settings) -> None:
    """An access token without a groups claim (the API's) must not demote an operator."""
    settings.OIDC_OPERATOR_GROUP = "ops"
    user_for_claims({"sub": "o3", "preferred_username": "oona", "groups": ["ops"]}, issuer=ISSUER)

    assert user_for_claims({"sub": "o3"}, issuer=ISSUER).is_superuser
    assert not user_for_claims({"sub": "o3", "groups": []}, issuer=ISSUER).is_superuser


def test_without_an_operator_group_flags_set_by_hand_stay(settings) -> None:
    settings.OIDC_OPERATOR_GROUP = ""
    user = user_for_claims({"sub": "o2", "preferred_username": "omar"}, issuer=ISSUER)
    user.is_staff = True
    user.save()

    assert user_for_claims({"sub": "o2", "groups": []}, issuer=ISSUER).is_staff


@pytest.mark.parametrize("sub", [None, "", 7, "x" * 256])
def test_claims_without_a_usable_subject_are_refused(sub) -> None:
    with pytest.raises(ClaimsRefused):
        user_for_claims({"sub": sub, "preferred_username": "nobody"}, issuer=ISSUER)
    assert not Identity.objects.exists()


def test_odd_characters_leave_a_valid_username() -> None:
    user = user_for_claims({"sub": "z", "preferred_username": "Zoë Smith/IT"}, issuer=ISSUER)

    user.full_clean()
    assert user.username == "ZoëSmithIT"
