"""Resource requests in Kubernetes quantity syntax ("500m", "2", "256Mi", "1e3"): pure code.

A task's `resources` is {"cpu": quantity, "memory": quantity}, as a Kubernetes container's
`resources.requests` (the Kubernetes executor hands them on as they are). Values are checked and
kept as written; `cpu_millis` and `memory_bytes` give the numbers a capacity check compares.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

KNOWN = ("cpu", "memory")
_QUANTITY = re.compile(
    r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Bounds that keep every figure inside a 64-bit integer column (millicores, bytes).
MAX_CPU_MILLIS = 10**12
MAX_MEMORY_BYTES = 2**62


class QuantityError(ValueError):
    """A quantity that is malformed or out of range; the message says why."""


def parse_quantity(text: str) -> Decimal:
    """The value of a non-negative Kubernetes quantity, exactly."""
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(
            "Must be a Kubernetes quantity: a non-negative number with an optional suffix "
            "(m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or e<exponent>), e.g. 500m, 2, 256Mi."
        )
    try:
        number = Decimal(match["number"])
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimal numbers
        raise QuantityError("Must be a number.") from None
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") else _DECIMAL[suffix]
    return number.scaleb(exponent)


def cpu_millis(text: str) -> int:
    value = parse_quantity(text) * 1000
    if value != value.to_integral_value():
        raise QuantityError("CPU cannot be finer than 1m (a thousandth of a core).")
    if value > MAX_CPU_MILLIS:
        raise QuantityError(f"At most {MAX_CPU_MILLIS // 1000} cores.")
    return int(value)


def memory_bytes(text: str) -> int:
    value = math.ceil(parse_quantity(text))  # Kubernetes rounds a fraction of a byte up
    if value > MAX_MEMORY_BYTES:
        raise QuantityError("At most 4Ei.")
    return value


MEASURES = {"cpu": cpu_millis, "memory": memory_bytes}


def normalize(value: object) -> dict[str, str]:
    """`value` checked: {"cpu"?: str, "memory"?: str}. Numbers are accepted as their text.
    Raises a dict of field -> message for the API to name (`resources.cpu`)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ResourcesError(
            {"non_field_errors": 'Must be an object such as {"cpu": "500m", "memory": "256Mi"}.'}
        )
    errors: dict[str, str] = {}
    clean: dict[str, str] = {}
    for key, raw in value.items():
        if key not in KNOWN:
            errors[str(key)] = f"Unknown resource; known: {', '.join(KNOWN)}."
            continue
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            errors[key] = "Must be a quantity string such as 500m or 256Mi."
            continue
        text = raw.strip() if isinstance(raw, str) else _number_text(raw)
        try:
            MEASURES[key](text)
        except QuantityError as exc:
            errors[key] = str(exc)
            continue
        clean[key] = text
    if errors:
        raise ResourcesError(errors)
    return clean


class ResourcesError(ValueError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


def _number_text(number: int | float) -> str:
    if isinstance(number, float) and not math.isfinite(number):
        return "nan"  # refused by the pattern
    text = repr(number)
    return text if "e" not in text else format(Decimal(text), "f")
