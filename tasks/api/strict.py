"""Input rules every request body of the API follows (the task, channel, token and seed routes):
a field the body does not take is a 400 naming it, and a bad choice lists the choices."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


def unknown_fields(data: Any, known: Any) -> dict[str, list[str]]:
    """`{field: [message]}` for each key of `data` not in `known` (nothing when not a mapping)."""
    if not isinstance(data, Mapping):
        return {}
    takes = ", ".join(sorted(known))
    message = f"Unknown field; this object takes {takes}." if takes else "Unknown field."
    return {str(key): [message] for key in data if key not in known}


# A serializer that refuses keys it has no writable field for, alongside its other errors (a
# misspelt optional field would otherwise be dropped without a word). No docstring: the schema
# would show it as the description of every body without its own.
class StrictSerializer(serializers.Serializer):
    # The writable fields found once per serializer, not once per body and twice at that (the
    # batch route validates 1,000 bodies with one serializer).
    @functools.cached_property
    def _writable(self) -> dict[str, serializers.Field]:
        return {name: field for name, field in self.fields.items() if not field.read_only}

    @property
    def _writable_fields(self) -> list[serializers.Field]:
        return list(self._writable.values())

    def to_internal_value(self, data: Any) -> Any:
        unknown = unknown_fields(data, self._writable)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**unknown, **exc.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class ChoiceField(serializers.ChoiceField):
    """DRF's ChoiceField whose error lists what may be chosen."""

    default_error_messages = {
        "invalid_choice": '"{input}" is not a valid choice; use one of {choices}.',
    }

    def to_internal_value(self, data: Any) -> Any:
        if data == "" and self.allow_blank:
            return ""
        try:
            return self.choice_strings_to_values[str(data)]
        except KeyError:
            self.fail(
                "invalid_choice", input=str(data)[:100], choices=", ".join(map(str, self.choices))
            )
