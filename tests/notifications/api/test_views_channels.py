"""Channel CRUD: write-only secrets, encryption at rest, the SSRF guard, isolation."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from rest_framework.test import APIClient

from notifications.models import Channel

pytestmark = pytest.mark.django_db

SECRETS = ("whsec-do-not-show-42", "xoxb-never-returned-77", "/services/T1/B2/s3cr3tPATH")


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]


def assert_no_secret(response) -> None:
    body = response.content.decode()
    for secret in SECRETS:
        assert secret not in body


def test_create_each_kind_and_never_return_secrets(api: APIClient) -> None:
    bodies = [
        {"kind": "email", "address": "ops@example.com", "name": "ops"},
        {"kind": "webhook", "url": "http://127.0.0.1:8080/hook", "secret": SECRETS[0]},
        {"kind": "webhook", "url": "http://127.0.0.1:8080/unsigned", "secret": None},
        {"kind": "slack", "token": SECRETS[1], "channel": "C-ops"},
        {"kind": "slack", "webhook_url": "http://127.0.0.1:8080" + SECRETS[2]},
    ]
    created = []
    for body in bodies:
        response = api.post("/api/v1/channels", body, format="json")
        assert response.status_code == 201, response.content
        assert_no_secret(response)
        created.append(response.json())

    email, signed, unsigned, bot, hook = created
    assert email["address"] == "ops@example.com" and email["has_secret"] is False
    assert signed["url"] == "http://127.0.0.1:8080/hook" and signed["has_secret"] is True
    assert unsigned["has_secret"] is False
    assert bot["channel"] == "C-ops" and bot["has_secret"] is True
    assert hook["webhook_host"] == "127.0.0.1" and hook["url"] is None
    assert all(c["secret"] is None for c in created), "only a generated secret is returned"
    for field in ("token", "webhook_url"):
        assert all(field not in c for c in created)

    listing = api.get("/api/v1/channels")
    assert listing.status_code == 200 and listing.json()["count"] == 5
    assert_no_secret(listing)
    for channel in created:
        assert_no_secret(api.get(f"/api/v1/channels/{channel['id']}"))


def test_webhook_secret_generated_when_absent_and_returned_once(api: APIClient) -> None:
    body = {"kind": "webhook", "url": "http://127.0.0.1:8080/hook"}
    created = api.post("/api/v1/channels", body, format="json")

    assert created.status_code == 201
    secret = created.json()["secret"]
    assert secret.startswith("whsec_") and created.json()["has_secret"] is True
    channel = Channel.objects.get(pk=created.json()["id"])
    assert channel.secrets == {"secret": secret}
    assert secret not in channel.secret_config, "encrypted at rest"
    for later in (
        api.get(f"/api/v1/channels/{channel.pk}"),
        api.get("/api/v1/channels"),
        api.patch(f"/api/v1/channels/{channel.pk}", {"name": "x"}, format="json"),
    ):
        assert secret not in later.content.decode()


@pytest.mark.parametrize(
    ("secret", "ok"),
    [
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", True),
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", True),  # unpadded base64
        ("whsec_not base64!", False),
        ("whsec_", False),
        ("a plain shared secret", True),  # the X-Scheduler-Signature scheme's form
    ],
)
def test_whsec_secrets_must_be_base64(api: APIClient, secret: str, ok: bool) -> None:
    body = {"kind": "webhook", "url": "http://127.0.0.1:8080/hook", "secret": secret}
    response = api.post("/api/v1/channels", body, format="json")
    assert response.status_code == (201 if ok else 400), response.content
    if ok:
        assert response.json()["secret"] is None, "a secret the client gave is not echoed"
    else:
        assert "secret" in response.json()


def test_secrets_are_encrypted_at_rest(api: APIClient) -> None:
    body = {"kind": "slack", "token": SECRETS[1], "channel": "C-ops"}
    channel_id = api.post("/api/v1/channels", body, format="json").json()["id"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(c)::text FROM notifications_channel c")
        [(row,)] = cursor.fetchall()
    assert SECRETS[1] not in row
    assert Channel.objects.get(pk=channel_id).secrets == {"token": SECRETS[1]}


def test_patch_keeps_or_replaces_secrets(api: APIClient) -> None:
    body = {"kind": "webhook", "url": "http://127.0.0.1:8080/hook", "secret": SECRETS[0]}
    channel_id = api.post("/api/v1/channels", body, format="json").json()["id"]
    url = f"/api/v1/channels/{channel_id}"

    moved = api.patch(url, {"url": "http://127.0.0.1:9090/new"}, format="json")
    assert moved.status_code == 200 and moved.json()["url"] == "http://127.0.0.1:9090/new"
    channel = Channel.objects.get(pk=channel_id)
    assert channel.secrets == {"secret": SECRETS[0]}

    renamed = api.patch(url, {"name": "ci", "all_tasks_events": ["failed", "failed"]}, "json")
    assert renamed.json()["name"] == "ci" and renamed.json()["all_tasks_events"] == ["failed"]

    unsigned = api.patch(url, {"secret": None}, format="json")
    assert unsigned.status_code == 200 and unsigned.json()["has_secret"] is False
    assert Channel.objects.get(pk=channel_id).secret_config == ""

    kind = api.patch(url, {"kind": "email"}, format="json")
    assert kind.status_code == 400 and "kind" in kind.json()


def test_slack_switches_between_webhook_and_token(api: APIClient) -> None:
    body = {"kind": "slack", "webhook_url": "http://127.0.0.1:8080" + SECRETS[2]}
    channel_id = api.post("/api/v1/channels", body, format="json").json()["id"]
    response = api.patch(
        f"/api/v1/channels/{channel_id}", {"token": SECRETS[1], "channel": "C1"}, format="json"
    )
    assert response.status_code == 200
    assert_no_secret(response)
    assert response.json()["webhook_host"] is None and response.json()["channel"] == "C1"
    assert Channel.objects.get(pk=channel_id).secrets == {"token": SECRETS[1]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "email"}, "address"),
        ({"kind": "email", "address": "not an address"}, "address"),
        ({"kind": "email", "address": "a@example.com", "url": "http://x.example/"}, "url"),
        ({"kind": "webhook"}, "url"),
        ({"kind": "webhook", "url": "ftp://127.0.0.1/x"}, "url"),
        ({"kind": "slack"}, "token"),
        ({"kind": "slack", "token": "xoxb-1"}, "channel"),
        ({"kind": "pager", "url": "http://127.0.0.1/"}, "kind"),
        (
            {"kind": "email", "address": "a@example.com", "all_tasks_events": ["nope"]},
            "all_tasks_events",
        ),
    ],
)
def test_invalid_channels_name_the_field(api: APIClient, body: dict, field: str) -> None:
    response = api.post("/api/v1/channels", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"kind": "webhook", "url": "http://127.0.0.1:8080/hook"}, "url", "loopback"),
        ({"kind": "webhook", "url": "http://169.254.169.254/latest/"}, "url", "metadata"),
        ({"kind": "webhook", "url": "http://10.1.2.3/hook"}, "url", "private"),
        ({"kind": "slack", "webhook_url": "http://[::1]:80/services/x"}, "webhook_url", "loopback"),
    ],
)
def test_ssrf_guard_refuses_internal_addresses(
    api: APIClient,
    settings,
    body: dict,
    field: str,
    reason: str,
) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = []
    response = api.post("/api/v1/channels", body, format="json")
    assert response.status_code == 400
    assert reason in " ".join(response.json()[field])
    assert not Channel.objects.exists()


def test_other_users_channels_answer_404(api: APIClient, other_api: APIClient) -> None:
    body = {"kind": "email", "address": "mine@example.com"}
    channel_id = api.post("/api/v1/channels", body, format="json").json()["id"]
    url = f"/api/v1/channels/{channel_id}"
    assert other_api.get(url).status_code == 404
    assert other_api.patch(url, {"name": "x"}, format="json").status_code == 404
    assert other_api.delete(url).status_code == 404
    assert other_api.get("/api/v1/channels").json()["count"] == 0
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404


def test_anonymous_is_401(anon: APIClient) -> None:
    assert anon.get("/api/v1/channels").status_code == 401
    assert anon.get("/api/v1/notifications").status_code == 401


def test_missing_encryption_key_is_503_not_500(api: APIClient, settings) -> None:
    settings.SCHEDULER_ENCRYPTION_KEY = ""
    body = {"kind": "webhook", "url": "http://127.0.0.1:8080/hook", "secret": SECRETS[0]}
    response = api.post("/api/v1/channels", body, format="json")
    assert response.status_code == 503
    assert response.json()["code"] == "encryption_key_missing"
    plain = {"kind": "email", "address": "ops@example.com"}
    assert api.post("/api/v1/channels", plain, format="json").status_code == 201


def test_openapi_schema_keeps_secrets_write_only(api: APIClient) -> None:
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert "/api/v1/channels" in schema["paths"] and "/api/v1/notifications" in schema["paths"]
    components = schema["components"]["schemas"]
    output = components["ChannelOutput"]["properties"]
    assert not {"secret", "token", "webhook_url"} & set(output)
    assert {"secret", "token", "webhook_url"} <= set(
        components["ChannelInputRequest"]["properties"]
    )
    for secret in SECRETS:
        assert secret not in response.content.decode()


@pytest.mark.parametrize(
    "extra", [{"token": "xoxb-1", "channel": "C1"}, {"token": "xoxb-1"}, {"channel": "C1"}]
)
def test_a_slack_webhook_and_a_token_together_are_a_400(api: APIClient, extra: dict) -> None:
    """Either one, not both: which one the deliverer used would be a guess."""
    webhook = {"kind": "slack", "webhook_url": "http://127.0.0.1:8080" + SECRETS[2]}

    response = api.post("/api/v1/channels", {**webhook, **extra}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["webhook_url"]
    assert not Channel.objects.exists()
    created = api.post("/api/v1/channels", webhook, format="json").json()
    patched = api.patch(f"/api/v1/channels/{created['id']}", {**webhook, **extra}, format="json")
    assert patched.status_code == 400, patched.content
