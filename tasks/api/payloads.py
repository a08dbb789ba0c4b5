"""Validation of the `payload` object, per task kind (docs/api.md); errors name its field."""

from __future__ import annotations

import math
import re
from typing import Any, NoReturn
from urllib.parse import urlsplit

from django.conf import settings
from rest_framework import serializers

from tasks import handlers

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"(?:[^\s][^\r\n\x00]*)?")


def _fail(field: str, message: str) -> NoReturn:
    raise serializers.ValidationError({"payload": {field: [message]}})


def _string_map(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        _fail(field, "Must be an object of string values.")
    if len(value) > 100:
        _fail(field, "At most 100 entries.")
    return value


def _headers(value: Any) -> dict[str, str]:
    """Request headers as HTTP sends them: a name is an RFC 9110 token, a value one line of
    Latin-1 text not starting with white space (what the HTTP client refuses would fail every
    attempt)."""
    headers = _string_map(value, "headers")
    for name, text in headers.items():
        if not _TOKEN.fullmatch(name):
            _fail("headers", f"Header {name!r}: a name is letters, digits and !#$%&'*+-.^_`|~.")
        if not _HEADER_VALUE.fullmatch(text) or not _latin1(text):
            _fail(
                "headers",
                f"Header {name!r}: a value is one line of Latin-1 text (no CR, LF or NUL), "
                "not starting with white space.",
            )
    return headers


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _validate_handler(payload: dict) -> dict:
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        _fail("name", "This field is required: the name of a registered handler.")
    if handlers.get(name) is None:
        _fail("name", f"Unknown handler {name!r}; registered: {', '.join(handlers.names())}.")
    args = payload.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        _fail("args", "Must be an object of keyword arguments.")
    declared = handlers.declared_arguments(name)
    unknown = sorted(key for key in args if declared is not None and key not in declared)
    if unknown:
        takes = ", ".join(declared or []) or "no arguments"
        message = f"Unknown argument; {name} takes {takes}."
        raise serializers.ValidationError({"payload": {"args": {k: [message] for k in unknown}}})
    if name == "sleep":
        seconds = args.get("seconds", 1)
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not (0 <= seconds <= 86400)
        ):
            _fail("args", "`seconds` must be a number from 0 to 86400.")
    return {"name": name, "args": args}


def _validate_http(payload: dict) -> dict:
    method = payload.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        _fail("method", f"Must be one of {', '.join(HTTP_METHODS)}.")
    url = payload.get("url")
    if not isinstance(url, str) or not url:
        _fail("url", "This field is required.")
    if len(url) > 2000:
        _fail("url", "At most 2000 characters.")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        _fail("url", "Must be an http or https URL with a host.")
    if parts.scheme not in ("http", "https") or not hostname:
        _fail("url", "Must be an http or https URL with a host.")
    _check_outbound(url)
    clean: dict[str, Any] = {"method": method.upper(), "url": url}
    clean["headers"] = _headers(payload.get("headers"))
    if "body" in payload and payload["body"] is not None:
        if not isinstance(payload["body"], (str, dict, list)):
            _fail("body", "Must be a string or a JSON object/array.")
        clean["body"] = payload["body"]
    if payload.get("timeout") is not None:
        timeout = payload["timeout"]
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or not 0 < timeout <= 3600
        ):
            _fail("timeout", "Must be a number of seconds from 0 to 3600.")
        clean["timeout"] = timeout
    if payload.get("expect_status") is not None:
        statuses = payload["expect_status"]
        if (
            not isinstance(statuses, list)
            or not statuses
            or not all(
                isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in statuses
            )
        ):
            _fail("expect_status", "Must be a non-empty list of HTTP status codes (100-599).")
        clean["expect_status"] = statuses
    return clean


def _check_outbound(url: str) -> None:
    try:
        from scheduler_project.outbound_http import OutboundBlocked, validate_url
    except ImportError:  # the guard module is optional only while it is being built
        return
    try:
        validate_url(url, allow=settings.SCHEDULER_OUTBOUND_ALLOW)
    except OutboundBlocked as exc:
        _fail("url", str(exc))


def _validate_executable(payload: dict) -> dict:
    args = payload.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or len(args) > 100:
        _fail("args", "Must be a list of at most 100 strings.")
    return {"args": args, "env": _string_map(payload.get("env"), "env")}


# The fields each kind's payload takes (a handler's `args` and an http `body` are free-form).
FIELDS = {
    "handler": ("name", "args"),
    "http": ("method", "url", "headers", "body", "timeout", "expect_status"),
    "executable": ("args", "env"),
}
VALIDATORS = {
    "handler": _validate_handler,
    "http": _validate_http,
    "executable": _validate_executable,
}


def validate_payload(kind: str | None, payload: Any) -> dict:
    """Return the payload in canonical form, or raise a ValidationError naming the field."""
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise serializers.ValidationError({"payload": ["Must be a JSON object."]})
    validator = VALIDATORS.get(kind or "")
    if validator is None:
        raise serializers.ValidationError({"kind": ["This field is required."]})
    takes = ", ".join(sorted(FIELDS[kind or ""]))
    unknown = {
        str(key): [f"Unknown field; a {kind} payload takes {takes}."]
        for key in payload
        if key not in FIELDS[kind or ""]
    }
    if unknown:
        raise serializers.ValidationError({"payload": unknown})
    clean = validator(payload)
    where = _oversized_integer_at(clean)
    if where:
        _fail(where[0], f"Integers must fit in 64 bits (at {'.'.join(where)}).")
    return clean


# JSON numbers are kept exactly in jsonb, but whatever reads them back (SQL casts, other
# clients' int64 parsers) breaks on more than 64 bits: refused like any other bad value.
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _oversized_integer_at(value: Any) -> list[str] | None:
    """The path (keys, indexes) of the first integer in `value` beyond 64 bits, or None."""
    stack: list[tuple[Any, list[str]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, [*path, str(key)]) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, [*path, str(index)]) for index, child in enumerate(item))
        elif isinstance(item, int) and not isinstance(item, bool):
            if not _INT64_MIN <= item <= _INT64_MAX:
                return path
    return None
