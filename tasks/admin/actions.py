"""What the task and run lists' actions share: one transition per selected row, refusals
reported apart."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest

from tasks import audit
from tasks.db import db_now
from tasks.exceptions import TasksError


def apply_each(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, verb: str, fn: Callable
) -> None:
    """Call a service for each selected row; report successes and refusals (409s) separately."""
    done, refused = 0, []
    now = db_now()
    for obj in queryset[:500]:  # a bulk action on "select all" must stay bounded
        try:
            fn(obj, now)
            done += 1
        except TasksError as exc:
            refused.append(f"{obj}: {exc.detail}")
    across = request.POST.get("select_across") == "1"
    selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
    audit.record(
        audit.bulk_entry(
            request.POST.get("action", ""),
            queryset.model._meta.model_name or "",
            user=request.user,
            filter={"query": request.GET.dict()} if across else {"selected": selected},
            count=done,
            refused=len(refused),
        )
    )
    if done:
        modeladmin.message_user(request, f"{verb}: {done}", messages.SUCCESS)
    for line in refused[:20]:
        modeladmin.message_user(request, line, messages.WARNING)
