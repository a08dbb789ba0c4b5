"""Signed JSON webhooks, plus the signing helpers receivers use to check them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from notifications.transports.base import (
    Message,
    Transport,
    TransportError,
    TransportSettings,
    register,
)
from scheduler_project import outbound_http as http

SIGNATURE_PREFIX = "sha256="
# Standard Webhooks (standardwebhooks.com): secrets are "whsec_" + base64 of the key bytes.
WHSEC_PREFIX = "whsec_"
# 408/425/429 ask the sender to come back later; every other 4xx is the receiver refusing.
TRANSIENT_CLIENT_STATUSES = frozenset({408, 425, 429})


def encode_body(body: dict[str, Any]) -> bytes:
    """The exact bytes sent and signed: compact JSON, sorted keys, UTF-8."""
    return json.dumps(
        body, cls=DjangoJSONEncoder, ensure_ascii=False, separators=(",", ":"), sort_keys=True
    ).encode("utf-8")


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Scheduler-Signature value: `sha256=` + hex HMAC-SHA256 of `<timestamp>.<body>`."""
    digest = hmac.new(
        secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256
    )
    return SIGNATURE_PREFIX + digest.hexdigest()


def generate_secret() -> str:
    """A new Standard Webhooks secret: `whsec_` + base64 of 32 random bytes."""
    return WHSEC_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a channel secret: the decoded bytes of a `whsec_` secret, otherwise the
    secret's UTF-8 bytes (channels made before Standard Webhooks; receivers verify those with
    `Webhook(secret.encode())`). ValueError for a `whsec_` secret that is not base64."""
    if not secret.startswith(WHSEC_PREFIX):
        return secret.encode("utf-8")
    encoded = secret[len(WHSEC_PREFIX) :]
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        raise ValueError("a whsec_ secret is base64 after the prefix") from None
    if not key:
        raise ValueError("a whsec_ secret needs key bytes after the prefix")
    return key


def sign_standard(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    """The webhook-signature value: `v1,` + base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`."""
    signed = delivery_id.encode("utf-8") + b"." + timestamp.encode("ascii") + b"." + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def verify_signature(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    tolerance_seconds: int = 300,
    now: datetime | float | None = None,
) -> bool:
    """True when `signature` (the header value) matches and `timestamp` (unix seconds) is within
    `tolerance_seconds` of `now`, which limits replays of a captured delivery."""
    try:
        sent_at = int(timestamp)
    except ValueError:
        return False
    if now is None:
        now = time.time()
    current = now.timestamp() if isinstance(now, datetime) else now
    if abs(current - sent_at) > tolerance_seconds:
        return False
    expected = sign(secret, timestamp, body)
    return hmac.compare_digest(expected.encode("utf-8"), signature.encode("utf-8"))


@register
class WebhookTransport(Transport):
    """POSTs Message.body as JSON to config["url"] through the SSRF guard.

    Headers: Standard Webhooks' webhook-id (the delivery id: stable across retries, for
    receivers to deduplicate) and webhook-timestamp, and when config has a "secret",
    webhook-signature; the same again as X-Scheduler-Delivery, X-Scheduler-Timestamp and
    X-Scheduler-Signature (the older scheme), plus X-Scheduler-Event.
    Any 2xx is delivered; 408/425/429, 5xx and network errors are transient; other statuses
    (including a redirect to another host, which is not followed) are permanent.
    """

    kind = "webhook"

    def send(
        self, config: dict[str, Any], message: Message, *, settings: TransportSettings
    ) -> None:
        url = config.get("url")
        if not isinstance(url, str) or not url:
            raise TransportError("webhook channel has no url", permanent=True)
        body = encode_body(message.body)
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": settings.user_agent,
            "X-Scheduler-Event": message.event,
            "X-Scheduler-Delivery": message.delivery_id,
            "X-Scheduler-Timestamp": timestamp,
            "webhook-id": message.delivery_id,
            "webhook-timestamp": timestamp,
        }
        if secret := config.get("secret"):
            headers["X-Scheduler-Signature"] = sign(secret, timestamp, body)
            try:
                headers["webhook-signature"] = sign_standard(
                    secret, message.delivery_id, timestamp, body
                )
            except ValueError as exc:  # stored before the API checked whsec_ secrets
                raise TransportError(f"webhook secret: {exc}", permanent=True) from None
        try:
            response = http.send(
                "POST",
                url,
                headers=headers,
                body=body,
                timeout=settings.timeout_seconds,
                allow=settings.outbound_allow,
            )
        except http.OutboundError as exc:
            raise TransportError.from_outbound(exc) from None
        raise_for_status(response.status_code, response.text)


def raise_for_status(status: int, text: str) -> None:
    """Map an HTTP status to success (2xx) or a transient/permanent TransportError."""
    if 200 <= status < 300:
        return
    transient = status >= 500 or status in TRANSIENT_CLIENT_STATUSES
    detail = " ".join(text.split())[:200]
    message = f"HTTP {status}" + (f": {detail}" if detail else "")
    raise TransportError(message, permanent=not transient)
