"""ORJSONRenderer writes what DRF's JSONRenderer writes, and PostgreSQL-built fragments as is."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from uuid import UUID

from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer

from scheduler_project.web.renderers import ORJSONRenderer, RawJSON

SAMPLE = {
    "id": UUID("019a1c2a-4014-70b9-9218-1e7acbb8bd00"),
    "at": datetime(2026, 3, 1, 12, 0, 0, 1234, tzinfo=UTC),
    "day": date(2026, 3, 1),
    "took": timedelta(seconds=90),
    "price": Decimal("1.50"),
    "lazy": gettext_lazy("This field is required."),
    "errors": {"name": [ErrorDetail("too long", code="max_length")]},
    "text": 'caf\u00e9 \u2028 \u2029 \U0001f600 "quoted" \\',
    "numbers": [0, -1, 2**63 - 1, 1.5, True, None],
    "nested": {"tuple": (1, 2), 3: "int key"},
}


def test_the_same_bytes_as_drf() -> None:
    assert ORJSONRenderer().render(SAMPLE) == JSONRenderer().render(SAMPLE)


def test_indented_output_parses_to_the_same_json() -> None:
    ours = ORJSONRenderer().render(SAMPLE, "application/json; indent=4")
    assert b"\n  " in ours
    assert json.loads(ours) == json.loads(JSONRenderer().render(SAMPLE))


def test_raw_json_is_written_verbatim() -> None:
    data = {"runs": RawJSON('[{"id" : "a", "n" : 1}]'), "next": None}
    assert ORJSONRenderer().render(data) == b'{"runs":[{"id" : "a", "n" : 1}],"next":null}'


def test_what_orjson_refuses_is_rendered_by_drf() -> None:
    # A user's payload may hold an integer wider than 64 bits (jsonb keeps it exactly).
    data = {"payload": {"n": 2**70}, "runs": RawJSON("[1,2]")}
    assert json.loads(ORJSONRenderer().render(data)) == {"payload": {"n": 2**70}, "runs": [1, 2]}


def test_none_is_an_empty_body() -> None:
    assert ORJSONRenderer().render(None) == b""
