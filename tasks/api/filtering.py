"""django-filter's backend, skipped when a request names none of the view's filters.

Without filter parameters the FilterSet filters nothing, but building and validating its form
still took about half a millisecond of every list request. Values of a named filter are
validated exactly as before (a bad `status` is still a 400 naming it, and listing the choices).
Also the ordering (an unknown term is a 400) and the priority filter (names as in the body).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field
from rest_framework import filters
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from tasks import expectations, history
from tasks.api.serializers import PRIORITY_SCHEMA, PriorityField
from tasks.models import Run, TaskHealth


class FilterBackend(DjangoFilterBackend):
    def filter_queryset(self, request: Request, queryset: QuerySet, view: Any) -> QuerySet:
        filterset_class = getattr(view, "filterset_class", None)
        if filterset_class is not None and not any(
            name in request.query_params for name in filterset_class.base_filters
        ):
            return queryset
        return super().filter_queryset(request, queryset, view)

    def get_filterset(self, request: Request, queryset: QuerySet, view: Any) -> Any:
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            for field in filterset.form.fields.values():
                choices = [str(value) for value, _ in getattr(field, "choices", ()) if value != ""]
                if choices:  # Django's message names the value, not what may be chosen
                    field.error_messages["invalid_choice"] = (
                        f"%(value)s is not a valid choice; use one of {', '.join(choices)}."
                    )
        return filterset


class OrderingFilter(filters.OrderingFilter):
    """DRF's `?ordering=`, with a term it cannot order by a 400 naming `ordering` and listing
    the terms it can (DRF drops such a term and orders by the default without a word), and the
    id last: rows equal on every term keep one order, so pages neither repeat nor skip them."""

    def get_ordering(self, request: Any, queryset: QuerySet, view: Any) -> list[str]:
        ordering = list(super().get_ordering(request, queryset, view) or [])
        if ordering and not {"id", "-id", "pk", "-pk"} & set(ordering):
            ordering.append("id")
        return ordering

    def remove_invalid_fields(
        self, queryset: QuerySet, fields: Iterable[str], view: Any, request: Any
    ) -> list[str]:
        valid = [item[0] for item in self.get_valid_fields(queryset, view, {"request": request})]
        terms = [term for term in fields if term]
        unknown = [term for term in terms if term.removeprefix("-") not in valid]
        if unknown:
            raise ValidationError(
                {
                    self.ordering_param: [
                        f"Cannot order by {', '.join(unknown)}; use {', '.join(valid)} "
                        "(with - before one for descending order)."
                    ]
                }
            )
        return terms


class PriorityFormField(forms.Field):
    """A priority as the task body takes it: 0-9 or low/medium/high."""

    def to_python(self, value: Any) -> int | None:
        if value in (None, ""):
            return None
        try:
            return PriorityField().to_internal_value(value)
        except ValidationError as exc:
            raise forms.ValidationError(PriorityField.default_error_messages["invalid"]) from exc


@extend_schema_field(PRIORITY_SCHEMA)
class PriorityFilter(django_filters.Filter):
    """`?priority=` with the values the task body accepts (`high` is 9)."""

    field_class = PriorityFormField


def last_run_status_filter() -> django_filters.ChoiceFilter:
    """A task list's `last_run_status`: the status of each task's `last_run` (its latest begun
    run, tasks/history.py), one index probe per task of the owner's list, only when asked."""

    def by_last_run(queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.alias(last_run_status=history.last_run("status")).filter(
            last_run_status=value
        )

    return django_filters.ChoiceFilter(
        choices=Run.Status.choices, method=by_last_run, help_text="status of the task's last_run"
    )


def health_filter() -> django_filters.ChoiceFilter:
    """A task list's `health` (`up` includes the tasks that expect nothing)."""

    def by_health(queryset: QuerySet, name: str, value: str) -> QuerySet:
        return expectations.with_health(queryset, value)

    return django_filters.ChoiceFilter(
        choices=TaskHealth.Health.choices, method=by_health, help_text="the task's health"
    )


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time read as its UTC instant: PostgreSQL refuses offsets past 15:59, which
    ISO 8601 allows (+22:06 is a 500 otherwise); a time with no UTC instant is a 400."""

    def to_python(self, value: Any) -> Any:
        moment = super().to_python(value)
        if moment is None:
            return None
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("Out of range once read in UTC.", code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    """A time filter whose value reaches the database in UTC (UtcIsoDateTimeField)."""

    field_class = UtcIsoDateTimeField
