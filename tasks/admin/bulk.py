""" "... all matching this filter" on the run and task lists: retry failed runs, cancel runs not
yet finished, pause active tasks, resume paused ones.

The list's own actions act on the rows ticked on one page (or "all", up to the actions' bound);
these act on every row the list's current filters and search match, across pages, that the
action applies to. Each asks first, saying how many, and the confirmation re-reads the same
filters through the admin's changelist (so through the user's scoped queryset), applies the
same transition as the API to each, records each in the object's history (LogEntry), and says
how many it changed and how many it could not. At most BATCH per confirmation, oldest first;
when more match, the message says so and the button does the next batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from tasks import audit
from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import CLAIMABLE_STATUSES, Run, Task
from tasks.transitions import lifecycle, run_actions

BATCH = 1000


@dataclass(frozen=True)
class Bulk:
    """One "... all matching this filter" action of a list."""

    name: str  # its URL ("<name>-matching/") and URL name ("<app>_<model>_<name>_matching")
    verb: str  # "Retry": the link, the question and the button
    done: str  # "Retried": the message and the history entry
    applies_to: Q  # the rows of the list the action applies to
    noun: str  # what those rows are called, singular: "failed run"
    nouns: str  # and plural: "failed runs"
    consequence: str  # what the confirmation says happens to each
    refusal: str  # why one of them may be refused by the time it is confirmed
    order: tuple[str, ...]  # oldest first: the batch a confirmation does
    # Applies the transition at `now`; False (or TasksError) when the row no longer qualified.
    apply: Callable[[Any, Any], bool]


def _retry(run: Run, now: Any) -> bool:
    run_actions.retry_run(run=run, now=now)
    return True


def _cancel(run: Run, now: Any) -> bool:
    run_actions.cancel_run(run=run, now=now)
    return True


# pause_task and resume_task leave a task in another status as it is, without refusing.
def _pause(task: Task, now: Any) -> bool:
    return lifecycle.pause_task(task=task, now=now).status == Task.Status.PAUSED


def _resume(task: Task, now: Any) -> bool:
    return lifecycle.resume_task(task=task, now=now).status != Task.Status.PAUSED


RETRY_FAILED = Bulk(
    name="retry",
    verb="Retry",
    done="Retried",
    applies_to=Q(status=Run.Status.FAILED),
    noun="failed run",
    nouns="failed runs",
    consequence="Each gets a fresh set of attempts, starting now.",
    refusal="no longer failed, or task cancelled",
    order=("scheduled_at", "id"),
    apply=_retry,
)
CANCEL_UNFINISHED = Bulk(
    name="cancel",
    verb="Cancel",
    done="Cancelled",
    applies_to=Q(status__in=(*CLAIMABLE_STATUSES, Run.Status.RUNNING)),
    noun="unfinished run",
    nouns="unfinished runs",
    consequence="Scheduled and waiting ones will not run; running ones are stopped.",
    refusal="finished meanwhile",
    order=("scheduled_at", "id"),
    apply=_cancel,
)
PAUSE_ACTIVE = Bulk(
    name="pause",
    verb="Pause",
    done="Paused",
    applies_to=Q(status=Task.Status.ACTIVE),
    noun="active task",
    nouns="active tasks",
    consequence="Each plans no new occurrence, and its planned runs not yet started are "
    "withdrawn, until it is resumed.",
    refusal="no longer active",
    order=("id",),
    apply=_pause,
)
RESUME_PAUSED = Bulk(
    name="resume",
    verb="Resume",
    done="Resumed",
    applies_to=Q(status=Task.Status.PAUSED),
    noun="paused task",
    nouns="paused tasks",
    consequence="Each continues from now; occurrences whose time fell inside the pause are "
    "recorded skipped.",
    refusal="no longer paused",
    order=("id",),
    apply=_resume,
)


def _plural(count: int, noun: str, nouns: str) -> str:
    return f"{count} {noun if count == 1 else nouns}"


class BulkMatching(admin.ModelAdmin):
    """A list with links to `bulk_actions`, each acting on everything its filter matches."""

    change_list_template = "admin/tasks/bulk_change_list.html"
    bulk_actions: tuple[Bulk, ...] = ()

    def _url_name(self, bulk: Bulk) -> str:
        opts = self.model._meta
        return f"{opts.app_label}_{opts.model_name}_{bulk.name}_matching"

    def get_urls(self) -> list[Any]:
        urls = []
        for bulk in self.bulk_actions:
            view = self.admin_site.admin_view(self._view_of(bulk))
            urls.append(path(f"{bulk.name}-matching/", view, name=self._url_name(bulk)))
        return [*urls, *super().get_urls()]

    def _view_of(self, bulk: Bulk) -> Callable[[HttpRequest], HttpResponse]:
        def view(request: HttpRequest) -> HttpResponse:
            return self.matching_view(request, bulk)

        return view

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        query = request.GET.urlencode()
        links = [
            {
                "id": f"{bulk.name}-matching",
                "url": reverse(f"admin:{self._url_name(bulk)}") + (f"?{query}" if query else ""),
                "label": f"{bulk.verb} all {bulk.nouns} matching this filter",
            }
            for bulk in self.bulk_actions
        ]
        return super().changelist_view(request, {**(extra_context or {}), "bulk_links": links})

    def _matching(self, request: HttpRequest, bulk: Bulk) -> Any:
        changelist = self.get_changelist_instance(request)  # the list's filters and search
        matching = changelist.get_queryset(request).filter(bulk.applies_to)
        narrow = getattr(self, "changeable_rows", None)  # tasks/admin/scope.py: by role
        return narrow(request, matching) if narrow is not None else matching

    def matching_view(self, request: HttpRequest, bulk: Bulk) -> HttpResponse:
        opts = self.model._meta
        changelist_url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        if not self.has_change_permission(request):
            return HttpResponseRedirect(reverse("admin:index"))
        try:
            matching = self._matching(request, bulk)
        except IncorrectLookupParameters:  # the list itself answers these with ?e=1
            return HttpResponseRedirect(changelist_url + "?e=1")
        query = request.GET.urlencode()
        back = changelist_url + (f"?{query}" if query else "")
        if request.method != "POST":
            count = matching.order_by().values("pk")[: BATCH + 1].count()
            shown = min(count, BATCH)
            context = {
                **self.admin_site.each_context(request),
                "opts": opts,
                "title": f"{bulk.verb} {bulk.nouns}",
                "bulk": bulk,
                "count": shown,
                "counted": _plural(shown, bulk.noun, bulk.nouns),
                "more": count > BATCH,
                "back": back,
            }
            return TemplateResponse(request, "admin/tasks/bulk_matching.html", context)
        ids = list(matching.order_by(*bulk.order).values_list("pk", flat=True)[:BATCH])
        now, changed, refused = db_now(), 0, 0
        for obj in self.model._default_manager.filter(pk__in=ids).order_by(*bulk.order):
            try:
                applied = bulk.apply(obj, now)
            except TasksError:
                applied = False
            if not applied:
                refused += 1
                continue
            self.log_change(request, obj, f"{bulk.done} (all {bulk.nouns} matching a filter)")
            changed += 1
        audit.record(
            audit.bulk_entry(
                bulk.name,
                self.model._meta.model_name or "",
                user=request.user,
                filter={"query": request.GET.dict(), "applies_to": bulk.nouns},
                count=changed,
                refused=refused,
            )
        )
        message = f"{bulk.done} {_plural(changed, bulk.noun, bulk.nouns)}."
        if refused:
            message += f" {refused} could not be {bulk.done.lower()} ({bulk.refusal})."
        if len(ids) == BATCH and self._matching(request, bulk).exists():
            message += f" More match: {bulk.verb.lower()} again for the next batch."
        self.message_user(request, message, messages.SUCCESS if changed else messages.WARNING)
        return HttpResponseRedirect(back)
