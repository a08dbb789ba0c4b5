"""Page-number pagination whose page stays a query, selected and counted by the statement that
writes the page (tasks/api/json_sql.py): a list page is one round trip."""

from __future__ import annotations

import re
from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

_BIGINT_MAX = 2**63 - 1
_WHOLE = re.compile(r"[0-9]+")


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500

    def page_query(self, queryset: QuerySet, request: Request) -> QuerySet:
        """The requested page of `queryset`, neither evaluated nor counted: the statement that
        writes the page selects it and counts `counted` in the same round trip, and `settle`
        takes that count. Validated and linked as DRF does it."""
        page_size: Any = self.get_page_size(request) or self.page_size
        self.request = request
        self.counted = queryset
        self._paginator: Any = self.django_paginator_class(queryset, page_size)
        raw: Any = self.get_page_number(request, self._paginator)
        if raw in self.last_page_strings:  # the last page's number needs the count first
            raw = self._paginator.num_pages
        self._number = int(raw)
        bottom = (self._number - 1) * page_size
        if bottom + page_size > _BIGINT_MAX:  # past any table's rows, and past OFFSET's bigint
            raise self._invalid(raw, Paginator.default_error_messages["no_results"])
        return queryset[bottom : bottom + page_size]

    def get_page_size(self, request: Request) -> int:
        """`page_size`, at most max_page_size; a value that is no whole number from 1 is a 400
        naming it (DRF would fall back to the default silently)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size  # type: ignore[return-value]
        if not _WHOLE.fullmatch(raw) or int(raw) < 1:
            raise ValidationError(
                {"page_size": [f"Must be a whole number from 1 (at most {self.max_page_size})."]}
            )
        return min(int(raw), self.max_page_size)

    def get_page_number(self, request: Request, paginator: Any) -> str:
        """`page`: a whole number from 1 or `last`; anything else is a 400 naming it (a page
        past the last stays a 404, as DRF answers it)."""
        raw = request.query_params.get(self.page_query_param) or "1"
        if raw not in self.last_page_strings and not (_WHOLE.fullmatch(raw) and int(raw) >= 1):
            raise ValidationError({"page": ["Must be a whole number from 1, or last."]})
        return raw

    def settle(self, total: int | None) -> None:
        """The page's count as its statement found it; None: the page has no rows, so it is
        page 1 of an empty list or past the last page (404, as DRF answers it)."""
        if total is None:
            if self._number > 1:
                raise self._invalid(self._number, Paginator.default_error_messages["no_results"])
            total = 0
        self._paginator.count = total  # Paginator.count is a cached_property: counted here
        self.page = self._paginator.page(self._number)

    def _invalid(self, number: Any, message: Any) -> NotFound:
        return NotFound(self.invalid_page_message.format(page_number=number, message=message))
