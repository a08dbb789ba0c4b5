"""The `resources` field of a task: requests in Kubernetes quantity syntax (tasks/resources.py)."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tasks import resources


@extend_schema_field(
    {
        "type": "object",
        "properties": {"cpu": {"type": "string"}, "memory": {"type": "string"}},
        "additionalProperties": False,
        "example": {"cpu": "500m", "memory": "256Mi"},
    }
)
class ResourcesField(serializers.Field):
    """{"cpu": "500m", "memory": "256Mi"}; JSON text in a multipart form; null or {} for none.
    A bad value is a 400 naming it: {"resources": {"cpu": ["..."]}}."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is None:
            return True, {}
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        if isinstance(data, str) and self.context.get("multipart"):
            try:
                data = json.loads(data)
            except (ValueError, RecursionError):
                raise serializers.ValidationError("Must be valid JSON.") from None
        try:
            return resources.normalize(data)
        except resources.ResourcesError as exc:
            raise serializers.ValidationError({k: [v] for k, v in exc.errors.items()}) from None

    def to_representation(self, value: dict[str, str]) -> dict[str, str]:
        return value
