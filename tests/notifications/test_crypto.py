"""Channel secrets at rest: Fernet with keys from SCHEDULER_ENCRYPTION_KEY, rotation, checks."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from notifications import crypto
from notifications.checks import check_notification_settings
from notifications.exceptions import EncryptionKeyMissing, SecretUnreadable


def test_round_trip_and_empty(settings) -> None:
    settings.SCHEDULER_ENCRYPTION_KEY = Fernet.generate_key().decode()
    token = crypto.encrypt({"token": "xoxb-1"})
    assert "xoxb-1" not in token
    assert crypto.decrypt(token) == {"token": "xoxb-1"}
    assert crypto.encrypt({}) == "" and crypto.decrypt("") == {}


def test_rotation_prepends_a_new_key(settings) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SCHEDULER_ENCRYPTION_KEY = old
    token = crypto.encrypt({"secret": "s"})
    settings.SCHEDULER_ENCRYPTION_KEY = f"{new},{old}"
    assert crypto.decrypt(token) == {"secret": "s"}
    settings.SCHEDULER_ENCRYPTION_KEY = new
    with pytest.raises(SecretUnreadable):
        crypto.decrypt(token)


def test_missing_key_refuses_to_store(settings) -> None:
    settings.SCHEDULER_ENCRYPTION_KEY = ""
    with pytest.raises(EncryptionKeyMissing):
        crypto.encrypt({"secret": "s"})


def test_tests_derive_a_key_from_secret_key(settings) -> None:
    assert crypto.parse_keys(settings.SCHEDULER_ENCRYPTION_KEY)


@pytest.mark.parametrize(
    ("overrides", "ids"),
    [
        ({}, []),
        ({"SCHEDULER_ENCRYPTION_KEY": ""}, ["notifications.W001"]),
        ({"SCHEDULER_ENCRYPTION_KEY": "short"}, ["notifications.E001"]),
        ({"NOTIFICATIONS_LEASE_SECONDS": 30}, ["notifications.E002"]),
        ({"NOTIFICATIONS_DELIVERY_CONCURRENCY": 0}, ["notifications.E003"]),
    ],
)
def test_system_checks(settings, overrides: dict, ids: list[str]) -> None:
    for name, value in overrides.items():
        setattr(settings, name, value)
    assert [m.id for m in check_notification_settings(None)] == ids
