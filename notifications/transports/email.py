"""Plain-text email through Django's configured email backend."""

from __future__ import annotations

import smtplib
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.core.validators import validate_email

from notifications.transports.base import (
    Message,
    Transport,
    TransportError,
    TransportSettings,
    register,
)


@register
class EmailTransport(Transport):
    """Sends Message.subject / Message.text to config["address"] with Django's EMAIL_BACKEND
    (SMTP settings EMAIL_HOST, EMAIL_PORT, ... read at call time).

    An invalid address or a recipient the server refuses with a 5xx is permanent; connection
    problems, timeouts, 4xx replies (greylisting, full mailbox) and our own SMTP configuration
    problems (sender refused, authentication) are transient.
    """

    kind = "email"

    def send(
        self, config: dict[str, Any], message: Message, *, settings: TransportSettings
    ) -> None:
        address = config.get("address")
        if not isinstance(address, str):
            raise TransportError("email channel has no address", permanent=True)
        try:
            validate_email(address)
        except ValidationError:
            raise TransportError(f"invalid email address {address!r}", permanent=True) from None
        timeout = getattr(django_settings, "EMAIL_TIMEOUT", None) or settings.timeout_seconds
        email = EmailMessage(
            # A newline in a header would be refused by Django as header injection.
            subject=" ".join(message.subject.split()),
            body=message.text,
            from_email=settings.default_from_email,
            to=[address],
            headers={
                "X-Scheduler-Event": message.event,
                "X-Scheduler-Delivery": message.delivery_id,
            },
            connection=get_connection(fail_silently=False, timeout=timeout),
        )
        try:
            email.send(fail_silently=False)
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            permanent = all(code >= 500 for code in codes)
            raise TransportError(
                f"recipient refused: {_describe(exc.recipients)}", permanent=permanent
            ) from None
        except (smtplib.SMTPSenderRefused, smtplib.SMTPAuthenticationError) as exc:
            raise TransportError(
                f"SMTP server refused the sender: {_reply(exc)}", permanent=False
            ) from None
        except smtplib.SMTPResponseException as exc:
            # Whole-message rejections (SMTPDataError, 5xx) are final; 4xx mean "try later".
            raise TransportError(
                f"SMTP error {_reply(exc)}", permanent=exc.smtp_code >= 500
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise TransportError(f"cannot send email: {exc}", permanent=False) from None


def _reply(exc: smtplib.SMTPResponseException) -> str:
    error = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else ""
    return f"{exc.smtp_code} {error}".strip()


def _describe(recipients: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(
        f"{address}: {code} {reply.decode('utf-8', 'replace')}"
        for address, (code, reply) in recipients.items()
    )
