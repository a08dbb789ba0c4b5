"""The JSON fields of a task body (`payload`, `schedule`): what they take and refuse is what
DRF's JSONField does after the storable check, whether or not the encoder's check is needed."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import pytest
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from tasks.api.serializers import PayloadField, check_storable_json

NAN = float("nan")


class Text(str):
    pass


VALUES = [
    {"name": "noop", "args": {"n": 1, "x": 2.5, "ok": True, "none": None, "l": [1, "a", []]}},
    {"n": 2**63 - 1, "m": -(2**63), "u": 2**64 - 1},
    {"n": 2**70},
    {"n": 10**5000},  # more digits than the encoder writes: refused
    {"x": NAN},
    {"x": float("inf")},
    {NAN: 1},
    {1: "a", 2.5: "b", None: "c", False: "d"},
    {(1, 2): "a"},
    {"t": (1, "a")},
    {"s": {1, 2}},
    OrderedDict(a=1),
    {"t": Text("a")},
    Text("a"),
    "text",
    7,
    None,
    [{"a": "\x00"}],
    {"a": "\ud800"},
    {"a": {"b": {"c": object()}}},
]


def _outcome(validate: Callable[[], object]) -> tuple[str, object]:
    try:
        return "valid", validate()
    except ValidationError as exc:
        return "refused", exc.detail


@pytest.mark.parametrize("value", VALUES)
def test_a_json_field_takes_and_refuses_what_drf_does(value) -> None:
    field = PayloadField()
    field.bind("payload", serializers.Serializer(context={"multipart": False}))

    def drf() -> object:
        check_storable_json(value)
        return serializers.JSONField.to_internal_value(field, value)

    ours, theirs = _outcome(lambda: field.to_internal_value(value)), _outcome(drf)
    assert ours == theirs, (ours, theirs)
    if ours[0] == "valid":
        assert ours[1] is value


def test_only_json_of_its_own_types_skips_the_encoder() -> None:
    assert check_storable_json({"a": [1, 2.5, "b", None, True, {"c": 2**64 - 1}]})
    for value in ({"a": (1,)}, {"a": 2**64}, {"a": NAN}, {1: "a"}, OrderedDict(), Text("a")):
        assert not check_storable_json(value), value
