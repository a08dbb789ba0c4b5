"""What every transport shares: the message, the settings it may use, errors, the registry."""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from scheduler_project.outbound_http import OutboundError

# A new channel kind is one module here plus its entry in this tuple.
BUILTIN_TRANSPORT_MODULES = (
    "notifications.transports.email",
    "notifications.transports.slack",
    "notifications.transports.webhook",
)
DEFAULT_USER_AGENT = "scheduler-notifications/1.0"


class TransportError(Exception):
    """Delivery failed. Permanent failures (the receiver said no, the address or URL is
    invalid or blocked) are not retried; transient ones (network, timeouts, 5xx, 429) are."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent

    @classmethod
    def from_outbound(cls, exc: OutboundError) -> TransportError:
        """A blocked URL is permanent (except a DNS outage); a network failure is transient."""
        return cls(exc.message, permanent=not exc.transient)


@dataclass(frozen=True)
class Message:
    """One notification, rendered once and handed to whichever transport the channel uses."""

    delivery_id: str  # the Notification id: stable across retries, receivers dedupe on it
    event: str
    created_at: datetime
    subject: str
    text: str
    body: dict[str, Any]  # the webhook JSON document: {"id", "event", "task", "run", "created_at"}
    task: dict[str, Any]
    run: dict[str, Any]  # {} for an alert about the task alone
    run_url: str  # the page a person opens: the run's admin page (the task's without a run)


@dataclass(frozen=True)
class TransportSettings:
    """Deployment configuration the transports need; built from Django settings by the caller."""

    outbound_allow: tuple[str, ...] = ()
    timeout_seconds: float = 10.0
    slack_api_base_url: str = "https://slack.com/api/"
    default_from_email: str | None = None  # None: Django's DEFAULT_FROM_EMAIL
    user_agent: str = DEFAULT_USER_AGENT


class Transport(abc.ABC):
    """Turns one Message into one outbound message for one channel configuration."""

    kind: ClassVar[str]

    @abc.abstractmethod
    def send(
        self, config: dict[str, Any], message: Message, *, settings: TransportSettings
    ) -> None:
        """Deliver `message` to the channel described by `config`; raise TransportError."""


_REGISTRY: dict[str, type[Transport]] = {}


def register(cls: type[Transport]) -> type[Transport]:
    """Class decorator: make `cls` available to get_transport() under `cls.kind`."""
    _REGISTRY[cls.kind] = cls
    return cls


def get_transport(kind: str) -> Transport:
    """The transport for a channel kind; LookupError for an unknown kind."""
    if kind not in _REGISTRY:
        # Imported lazily: the transport modules import this one to register themselves.
        for module in BUILTIN_TRANSPORT_MODULES:
            importlib.import_module(module)
    try:
        return _REGISTRY[kind]()
    except KeyError:
        raise LookupError(f"no notification transport for channel kind {kind!r}") from None
