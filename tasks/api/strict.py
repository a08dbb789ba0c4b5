"""Input rules every request body of the API follows (the task, channel, token and seed routes):
a field the body does not take is a 400 naming it, and a bad choice lists the choices."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import fields, serializers
from rest_framework.fields import SkipField, empty, get_error_detail
from rest_framework.utils import html


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

    @functools.cached_property
    def _plan(self) -> list[tuple[str, serializers.Field, Any, bool, bool]]:
        """Per writable field: its name, itself, its `validate_<name>` method, whether DRF's own
        code decides what an absent key means (`_drf_absent`), and whether it is optional with
        no default."""
        return [
            (
                name,
                field,
                getattr(self, "validate_" + name, None),
                _drf_absent(field),
                not field.required and field.default is empty,
            )
            for name, field in self._writable.items()
        ]

    def _fields_value(self, data: Any) -> Any:
        """DRF's Serializer.to_internal_value, but a key the body leaves out is passed over when
        DRF would skip its field (optional and no default, or a partial update) without the
        field's `get_value`, `run_validation` and the SkipField they raise: 14 of a task body's
        19 fields are usually absent, and this was a third of validating it."""
        if not isinstance(data, Mapping) or html.is_html_input(data):
            return super().to_internal_value(data)
        partial = getattr(self.root, "partial", False)
        value: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for name, field, validate, drf_absent, optional in self._plan:
            if drf_absent and (optional or partial) and name not in data:
                continue
            try:
                validated = field.run_validation(field.get_value(data))
                if validate is not None:
                    validated = validate(validated)
            except serializers.ValidationError as exc:
                errors[name] = exc.detail
            except DjangoValidationError as exc:
                errors[name] = get_error_detail(exc)
            except SkipField:
                pass
            else:
                self.set_value(value, field.source_attrs, validated)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def to_internal_value(self, data: Any) -> Any:
        unknown = unknown_fields(data, self._writable)
        try:
            value = self._fields_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**unknown, **exc.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


# The implementations under which a key absent from a body that is not an HTML form reaches
# `Field.validate_empty_values` as `empty`: skipped for a partial update, required, else the
# default or skipped (`get_default`). A field with any other is validated as DRF does.
_DRF_ABSENT: dict[str, set[Any]] = {
    "get_value": {
        fields.Field.get_value,
        fields.JSONField.get_value,
        fields.ListField.get_value,
        fields.DictField.get_value,
        serializers.Serializer.get_value,
        serializers.ListSerializer.get_value,
    },
    "run_validation": {
        fields.Field.run_validation,
        fields.CharField.run_validation,
        serializers.Serializer.run_validation,
        serializers.ListSerializer.run_validation,
    },
    "validate_empty_values": {fields.Field.validate_empty_values},
    "get_default": {fields.Field.get_default},
}


def _drf_absent(field: serializers.Field) -> bool:
    return all(getattr(type(field), name) in known for name, known in _DRF_ABSENT.items())


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
