"""Slack messages, by incoming webhook or by bot token (chat.postMessage via slack-sdk)."""

from __future__ import annotations

import logging
import math
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError

from notifications.transports.base import (
    Message,
    Transport,
    TransportError,
    TransportSettings,
    register,
)
from scheduler_project import outbound_http as http

# Slack API error codes worth retrying; every other error code means the channel is broken.
TRANSIENT_API_ERRORS = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "fatal_error",
        "internal_error",
        "service_unavailable",
        "request_timeout",
    }
)
# Incoming-webhook errors arrive as plain text with these statuses; 408/425/429 and 5xx retry.
TRANSIENT_STATUSES = frozenset({408, 425, 429})
EVENT_ICONS = {"succeeded": ":white_check_mark:", "failed": ":warning:"}
DEFAULT_ICON = ":rotating_light:"
# slack-sdk's DEBUG output includes the Authorization header, so its client never logs below INFO.
_SDK_LOGGER = logging.getLogger(f"{__name__}.sdk")
_SDK_LOGGER.setLevel(logging.INFO)


@register
class SlackTransport(Transport):
    """Posts a Block Kit message about a run to Slack (or anything speaking its webhook format).

    config {"webhook_url"}: POSTs {"text", "blocks"} to the incoming webhook through the SSRF
    guard (scheduler_project.outbound_http), which also pins the validated address and refuses
    cross-host redirects; slack-sdk's WebhookClient would re-resolve the name and follow redirects
    to any host. Mattermost, Rocket.Chat and others accept the same payload.
    config {"token", "channel"}: slack-sdk WebClient.chat_postMessage against
    settings.slack_api_base_url (operator configuration, so not put through the guard).
    invalid_auth, channel_not_found, not_in_channel and other 4xx are permanent; rate limits,
    5xx and network errors are transient.
    """

    kind = "slack"

    def send(
        self, config: dict[str, Any], message: Message, *, settings: TransportSettings
    ) -> None:
        payload = build_payload(message)
        if config.get("webhook_url"):
            _send_webhook(str(config["webhook_url"]), payload, settings)
        elif config.get("token") and config.get("channel"):
            _post_message(str(config["token"]), str(config["channel"]), payload, settings)
        else:
            raise TransportError(
                "slack channel needs webhook_url or token and channel", permanent=True
            )


def build_payload(message: Message) -> dict[str, Any]:
    """{"text", "blocks"}: a header, the task/run facts, the error if any, a link to the run."""
    task, run = message.task, message.run
    icon = EVENT_ICONS.get(message.event, DEFAULT_ICON)
    task_name = str(task.get("name") or task.get("id") or "task")
    status = run.get("status") or message.event
    attempt = run.get("attempt")
    if attempt is not None and run.get("max_attempts"):
        attempt = f"{attempt} of {run['max_attempts']}"
    fields = [
        f"*Task*\n{_escape(task_name)} (`{_escape(str(task.get('id', '')))}`)",
        f"*Run*\n`{_escape(str(run.get('id', '-')))}`",
        f"*Status*\n{_escape(str(status))} ({_escape(message.event)})",
        f"*Attempt*\n{_escape(str(attempt if attempt is not None else '-'))}",
    ]
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _clip(message.subject, 150), "emoji": True},
        },
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
    ]
    if error := run.get("error"):
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"```{_escape(_clip(str(error), 2800))}```"},
            }
        )
    blocks.append(
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"{icon} <{message.run_url}|View {'run' if run else 'task'}>",
            },
        }
    )
    return {"text": f"{message.subject} {message.run_url}", "blocks": blocks}


def _send_webhook(url: str, payload: dict[str, Any], settings: TransportSettings) -> None:
    try:
        response = http.send(
            "POST",
            url,
            headers={"Content-Type": "application/json", "User-Agent": settings.user_agent},
            body=None,
            json=payload,
            timeout=settings.timeout_seconds,
            allow=settings.outbound_allow,
        )
    except http.OutboundError as exc:
        raise TransportError.from_outbound(exc) from None
    if 200 <= response.status_code < 300:
        return
    transient = response.status_code >= 500 or response.status_code in TRANSIENT_STATUSES
    detail = " ".join(response.text.split())[:200]
    raise TransportError(f"HTTP {response.status_code}: {detail}", permanent=not transient)


def _post_message(
    token: str, channel: str, payload: dict[str, Any], settings: TransportSettings
) -> None:
    client = WebClient(
        token=token,
        base_url=settings.slack_api_base_url.rstrip("/") + "/",
        timeout=max(1, math.ceil(settings.timeout_seconds)),
        user_agent_prefix=settings.user_agent,
        retry_handlers=[],  # the outbox retries with backoff; no hidden retries here
        logger=_SDK_LOGGER,
    )
    try:
        client.chat_postMessage(channel=channel, unfurl_links=False, **payload)
    except SlackApiError as exc:
        status = exc.response.status_code
        error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
        transient = status >= 500 or status in TRANSIENT_STATUSES or error in TRANSIENT_API_ERRORS
        detail = str(error or "no error code")[:200]
        prefix = "Slack API" if status == 200 else f"Slack API HTTP {status}"
        raise TransportError(f"{prefix}: {detail}", permanent=not transient) from None
    except SlackRequestError as exc:
        raise TransportError(f"Slack request invalid: {exc}", permanent=True) from None
    except (SlackClientError, OSError) as exc:
        raise TransportError(f"cannot reach Slack: {exc}", permanent=False) from None


def _escape(text: str) -> str:
    # Slack mrkdwn control characters; everything else is shown as typed.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
