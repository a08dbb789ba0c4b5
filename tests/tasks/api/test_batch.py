"""tasks/api/batch.py: the batch's outer body takes each task body as DRF's DictField does."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from tasks.api.batch import BatchInputSerializer


class _DictFieldBatch(serializers.Serializer):
    tasks = serializers.ListField(child=serializers.DictField(), allow_empty=False, max_length=1000)


@pytest.mark.parametrize(
    "data",
    [
        {"tasks": [{"kind": "handler", "payload": {"name": "noop"}, "schedule": None}, {}]},
        {"tasks": [{"name": None, "priority": [1, {"a": None}], "1": "x"}]},
        {"tasks": [{"kind": "handler"}, "not an object", None, 3, []]},
        {"tasks": []},
        {"tasks": {"kind": "handler"}},
        {"tasks": [{}] * 1001},
    ],
)
def test_bodies_are_taken_as_dictfield_takes_them(data) -> None:
    ours, drfs = BatchInputSerializer(data=data), _DictFieldBatch(data=data)
    assert ours.is_valid() == drfs.is_valid()
    assert ours.errors == drfs.errors
    if not drfs.errors:
        assert ours.validated_data == drfs.validated_data
