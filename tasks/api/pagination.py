"""Page-number pagination; a page can stay a query, for a statement that uses it as a subquery."""

from __future__ import annotations

from typing import Any, cast

from django.core.paginator import InvalidPage
from django.db.models import QuerySet
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500

    def page_query(self, queryset: QuerySet, request: Request) -> QuerySet:
        """paginate_queryset's page, not evaluated: the statement that writes the page's JSON
        selects the page in the same round trip (tasks/api/json_sql.py). Counted, validated
        and linked as DRF does it."""
        page_size: Any = self.get_page_size(request) or self.page_size
        paginator: Any = self.django_paginator_class(queryset, page_size)
        page_number = self.get_page_number(request, paginator)
        try:
            self.page = paginator.page(page_number)
        except InvalidPage as exc:
            raise NotFound(self.invalid_page_message.format(
                page_number=page_number, message=str(exc)
            )) from None  # fmt: skip
        self.request = request
        return cast(QuerySet, self.page.object_list)
