"""Log output for every role: JSON lines in production, plain text in development; secrets masked.

`LOG_FORMAT=json|plain` picks the formatter (settings.py defaults to plain under DEBUG or tests).
`RedactFilter` sits on the handler, so it sees every record, propagated ones included.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

MASK = "***"

# Attributes every LogRecord has; anything else on a record came from `extra=` and is a field.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

# Keys whose values are secrets wherever they appear: `key=value`, `key: value`, `"key": "value"`.
_SECRET_KEYS = (
    r"authorization|password|passwd|secret|token|api[_-]?key|signing[_-]?key|encryption[_-]?key"
    r"|x-scheduler-signature|cookie|sessionid"
)
_KEY_VALUE = re.compile(
    rf"""(?P<key>["']?[\w-]*(?:{_SECRET_KEYS})[\w-]*["']?\s*[:=]\s*)"""
    r"""(?P<value>"[^"]*"|'[^']*'|(?:Bearer|Basic|Token)\s+\S+|[^\s,;&}]+)""",
    re.IGNORECASE,
)
# A bare bearer credential, e.g. inside a repr of headers, and JWTs (access and refresh tokens).
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[\w-]+\.[\w-]+\.[\w-]*")
# Webhook URLs carry their credential in the path (Slack's /services/T000/B000/XXXX) or the
# query string: keep the scheme and host, which are what an operator needs to debug.
_URL = re.compile(r"\b(?P<origin>https?://[^/\s?#\"']+)(?P<rest>[/?#][^\s\"'<>]*)", re.IGNORECASE)
# user:password@host in database and other URLs.
_URL_PASSWORD = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://[^:/\s@]+:)[^@/\s]+@", re.IGNORECASE)


# Every pattern above needs one of these; one search lets the common line (ids, counts) through
# without running the substitutions (a worker logs two lines per run).
_MAYBE_SECRET = re.compile(rf"://|bearer|basic|eyJ|{_SECRET_KEYS}", re.IGNORECASE)


def redact(text: str) -> str:
    """Mask credentials in free text (messages, tracebacks); leave everything else readable."""
    if not _MAYBE_SECRET.search(text):
        return text
    text = _URL_PASSWORD.sub(rf"\g<scheme>{MASK}@", text)
    text = _URL.sub(rf"\g<origin>/{MASK}", text)
    text = _BEARER.sub(rf"\1 {MASK}", text)
    text = _JWT.sub(MASK, text)

    def _value(match: re.Match[str]) -> str:
        value = match.group("value")
        quote = value[0] if value[:1] in "\"'" else ""
        return f"{match.group('key')}{quote}{MASK}{quote}"

    return _KEY_VALUE.sub(_value, text)


def _secret_key(name: str) -> bool:
    return re.search(_SECRET_KEYS, name, re.IGNORECASE) is not None


class RedactFilter(logging.Filter):
    """Masks secrets in the message, the traceback and `extra=` fields; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call must still be logged, as logging itself would
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        for key, value in list(vars(record).items()):
            if key in _STANDARD:
                continue
            if _secret_key(key):
                setattr(record, key, MASK)
            elif isinstance(value, str):
                setattr(record, key, redact(value))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then every `extra=` field."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc_info"] = record.exc_text
        return json.dumps(entry, default=str)


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The LOGGING dict for settings.py: one stdout handler, redaction, the chosen format."""
    if log_format not in ("json", "plain"):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain, not {log_format!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"redact": {"()": "scheduler_project.logging.RedactFilter"}},
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
            "json": {"()": "scheduler_project.logging.JsonFormatter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
                "formatter": log_format,
                "filters": ["redact"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.db.backends": {"level": "INFO"},
            # urllib3 logs each request line at DEBUG, path and query included: a Slack webhook
            # URL's path is its credential, and that line has no scheme or host for the
            # redaction filter to spot.
            "urllib3": {"level": "INFO"},
        },
    }
