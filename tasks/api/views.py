"""Task and run endpoints: validate, call one service, serialize (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import django_filters
from django.db.models import QuerySet
from django.http import Http404, QueryDict
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import generics, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access
from scheduler_project.auth import request_owner
from scheduler_project.web.parsers import UPLOAD_PARSERS
from scheduler_project.web.renderers import RawJSON
from tasks import history, occurrences
from tasks.api import filtering
from tasks.api.bodies import TASK_BODY, UPLOAD_BODY
from tasks.api.creation_warnings import task_warnings, with_warnings
from tasks.api.filtering import PriorityFilter, UtcIsoDateTimeFilter
from tasks.api.json_sql import (
    iso_json,
    runs_json,
    runs_page_json,
    task_json,
    tasks_page_json,
    visible_tasks_page_json,
)
from tasks.api.pagination import Pagination
from tasks.api.run_serializers import RunSerializer
from tasks.api.serializers import (
    PreviewSerializer,
    ScheduleField,
    TaskInputSerializer,
    TaskOutputSerializer,
)
from tasks.api.strict import unknown_fields
from tasks.db import db_now
from tasks.models import Run, Task
from tasks.schedule_describe import describe
from tasks.transitions import creation, lifecycle, run_actions

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    404: OpenApiResponse(description="No such object among the caller's own."),
}
CONFLICT = {409: OpenApiResponse(description="Conflicts with a run in flight or a finished run.")}


class PagedListView(generics.ListAPIView):
    @property
    def pagination(self) -> Pagination:
        # Every list is paginated (settings DEFAULT_PAGINATION_CLASS is Pagination).
        return cast(Pagination, self.paginator)


def owned_tasks(request: Request) -> QuerySet[Task]:
    """The tasks the caller may see (accounts/access.py)."""
    return access.visible(Task.objects.all(), request_owner(request))


def visible_runs(request: Request) -> QuerySet[Run]:
    return access.visible(Run.objects.all(), request_owner(request), team="task__team")


def changeable_task(request: Request, pk: Any) -> Task:
    """The caller's task `pk` for a write: 404 unless they see it, 403 for a team's viewer."""
    task = get_object_or_404(owned_tasks(request), pk=pk)
    access.require(request_owner(request), task, access.EDITOR)
    return task


def task_response(request: Request, task: Task, code: int = status.HTTP_200_OK) -> Response:
    """The task as every read returns it (tasks/api/json_sql.py), after a write too."""
    return Response(
        task_json(task.pk, owner=request_owner(request), now=timezone.now()), status=code
    )


def run_response(request: Request, run: Run, code: int = status.HTTP_200_OK) -> Response:
    return Response(runs_json([run.pk], owner_id=request_owner(request).pk)[0], status=code)


class TaskFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")
    status = django_filters.ChoiceFilter(choices=Task.Status.choices)
    kind = django_filters.ChoiceFilter(choices=Task.Kind.choices)
    priority = PriorityFilter()
    last_run_status = filtering.last_run_status_filter()
    health = filtering.health_filter()
    taskset = django_filters.CharFilter(field_name="taskset__name", help_text="One task set's.")
    team = django_filters.CharFilter(field_name="team__slug", help_text="One team's (its slug).")

    class Meta:
        model = Task
        fields = [
            "name",
            "status",
            "kind",
            "priority",
            "last_run_status",
            "health",
            "taskset",
            "team",
        ]


# `?ordering=` values that are the task list's default order (OrderingFilter adds the id).
DEFAULT_ORDERINGS = ("", "-created_at")


class TaskListCreateView(PagedListView):
    serializer_class = TaskOutputSerializer  # the schema; the page is built by json_sql
    parser_classes = UPLOAD_PARSERS
    filterset_class = TaskFilter
    ordering_fields = ["created_at", "updated_at", "priority", "next_run_at", "name"]
    ordering = ["-created_at"]

    def get_queryset(self) -> QuerySet[Task]:
        return access.visible(self._listed(), request_owner(self.request))

    def _listed(self) -> QuerySet[Task]:
        """Every task, before the caller's visibility narrows them."""
        # `next_run_at` (the next fire time) is no column: an alias, computed only when the
        # list is ordered by it (two index probes per task of the owner's filtered list), and
        # only then added: each part of a member's page and count carries the list's aliases,
        # and copying this one into each took 1.5-2 ms of CPU per page (bench/NOTEBOOK.md,
        # "The task list's count by parts").
        self.now = getattr(self, "now", None) or timezone.now()
        terms = (getattr(self.request, "query_params", None) or {}).get("ordering", "")
        if "next_run_at" not in {term.strip().lstrip("-") for term in terms.split(",")}:
            return Task.objects.all()
        return Task.objects.alias(next_run_at=history.next_run_at(self.now))

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Filtered and ordered by the ORM; the page selected, counted and written by PostgreSQL.
        self.now = timezone.now()
        owner = request_owner(request)
        if self._newest_first_unfiltered(request):
            # The default list: its parts are named SQL, one statement whatever the caller's
            # teams (json_sql.visible_tasks_page_json). The ORM's query is built only for the
            # page's bounds (validated as for any list), never compiled.
            sliced = self.pagination.page_query(self.filter_queryset(self._listed()), request)
            low, high = sliced.query.low_mark, sliced.query.high_mark or 0
            tasks, total = visible_tasks_page_json(owner=owner, low=low, high=high, now=self.now)
            self.pagination.settle(total)
            return self.get_paginated_response(tasks)
        ids = self.filter_queryset(self.get_queryset()).values_list("id", flat=True)
        # The page's bounds from the visible list; its rows read and counted by visibility's
        # parts, each an index read of its own for a team's member (accounts/access.py).
        bounds = self.pagination.page_query(ids, request).query
        listed = self.filter_queryset(self._listed()).values_list("id", flat=True)
        page = access.visible_page(listed, owner, bounds.low_mark, bounds.high_mark or 0)
        counted = access.visible_counted(listed, owner)
        # Selected and counted by the JSON's statement, in one round trip.
        tasks, total = tasks_page_json(page, counted, owner=owner, now=self.now)
        self.pagination.settle(total)
        return self.get_paginated_response(tasks)  # each item written into the body as is

    def _newest_first_unfiltered(self, request: Request) -> bool:
        """The list as most requests ask it: no filter, the default order (newest first, then
        id), a page by its number (`last` needs the count first)."""
        params = request.query_params
        return (
            not any(name in params for name in TaskFilter.base_filters)
            and params.get(filtering.OrderingFilter.ordering_param, "") in DEFAULT_ORDERINGS
            and params.get(self.pagination.page_query_param) not in Pagination.last_page_strings
        )

    @extend_schema(
        request=TASK_BODY,
        responses={201: TaskOutputSerializer, 200: TaskOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        now = db_now()
        multipart = request.content_type.startswith("multipart/")
        serializer = TaskInputSerializer(
            data=request.data, context={"now": now, "multipart": multipart, "request": request}
        )
        serializer.is_valid(raise_exception=True)
        task, created = creation.create_task(
            owner=request_owner(request), data=serializer.validated_data, now=now
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        response = task_response(request, task, code)
        upload = request.FILES.get("file") if multipart else None
        response.data = with_warnings(response.data, task_warnings(task, upload))
        return response


class TaskUploadView(APIView):
    """POST /tasks/upload: an executable task with its file, multipart only (the same create)."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        request=UPLOAD_BODY,
        responses={201: TaskOutputSerializer, 200: TaskOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = request.data
        if isinstance(data, QueryDict) and "kind" not in data:
            data._mutable = True  # parsed for this request alone
            data["kind"] = Task.Kind.EXECUTABLE
        return TaskListCreateView.post(self, request)  # type: ignore[arg-type]


class TaskDetailView(APIView):
    parser_classes = UPLOAD_PARSERS

    @extend_schema(responses={200: TaskOutputSerializer, **ERRORS})
    def get(self, request: Request, pk: Any) -> Response:
        found = task_json(pk, owner=request_owner(request), now=timezone.now())
        if found is None:
            raise Http404("No Task matches the given query.")
        return Response(found)

    @extend_schema(
        request=TASK_BODY,
        responses={200: TaskOutputSerializer, **ERRORS, **CONFLICT},
    )
    def patch(self, request: Request, pk: Any) -> Response:
        return self._update(request, pk, partial=True)

    @extend_schema(
        request=TASK_BODY,
        responses={200: TaskOutputSerializer, **ERRORS, **CONFLICT},
    )
    def put(self, request: Request, pk: Any) -> Response:
        return self._update(request, pk, partial=False)

    def _update(self, request: Request, pk: Any, *, partial: bool) -> Response:
        task = changeable_task(request, pk)
        now = db_now()
        multipart = request.content_type.startswith("multipart/")
        serializer = TaskInputSerializer(
            task,
            data=request.data,
            partial=partial,
            context={"now": now, "multipart": multipart, "request": request},
        )
        serializer.is_valid(raise_exception=True)
        task = lifecycle.update_task(task=task, data=serializer.validated_data, now=now)
        return task_response(request, task)

    @extend_schema(
        parameters=[OpenApiParameter("force", bool, description="also cancel a running run")],
        responses={204: None, **ERRORS, **CONFLICT},
    )
    def delete(self, request: Request, pk: Any) -> Response:
        task = changeable_task(request, pk)
        force = request.query_params.get("force", "").lower() in ("true", "1", "yes")
        lifecycle.cancel_task(task=task, force=force, now=db_now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class TaskActionView(APIView):
    """POST /tasks/{id}/pause|resume: the task as it is then."""

    verb = ""
    token_scopes = {"POST": ("run",)}  # a service token needs `run` (accounts/token_auth.py)

    @extend_schema(request=None, responses={200: TaskOutputSerializer, **ERRORS, **CONFLICT})
    def post(self, request: Request, pk: Any) -> Response:
        task = changeable_task(request, pk)
        if self.verb == "pause":
            return task_response(request, lifecycle.pause_task(task=task, now=db_now()))
        return task_response(request, lifecycle.resume_task(task=task, now=db_now()))


class TaskRunActionView(APIView):
    """POST /tasks/{id}/run-now|skip-next: the run it created (201) or skipped (200)."""

    verb = ""
    token_scopes = {"POST": ("run",)}  # a service token needs `run` (accounts/token_auth.py)

    @extend_schema(
        request=None, responses={200: RunSerializer, 201: RunSerializer, **ERRORS, **CONFLICT}
    )
    def post(self, request: Request, pk: Any) -> Response:
        task = changeable_task(request, pk)
        if self.verb == "run-now":
            run = lifecycle.run_now(task=task, now=db_now())
            return run_response(request, run, status.HTTP_201_CREATED)
        return run_response(request, lifecycle.skip_next(task=task, now=db_now()))


class RunFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Run.Status.choices)

    class Meta:
        model = Run
        fields = ["status"]


class TaskRunListView(PagedListView):
    serializer_class = RunSerializer  # the schema; the page itself is built by json_sql.runs_json
    filterset_class = RunFilter
    ordering_fields = ["scheduled_at", "finished_at"]
    ordering = ["-scheduled_at"]

    def get_queryset(self) -> QuerySet[Run]:
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        return Run.objects.filter(task_id=self.kwargs["pk"])

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Filtered and ordered by the ORM (every list is paginated, settings
        # DEFAULT_PAGINATION_CLASS); the page's runs written by PostgreSQL, which writes only
        # the caller's own. So another owner's task shows as no runs, and only then is the
        # task's owner read: a query fewer for every page that has runs.
        ids = self.filter_queryset(self.get_queryset()).values_list("id", flat=True)
        page = self.pagination.page_query(ids, request)  # selected and counted by the JSON's
        runs, total = runs_page_json(
            page, self.pagination.counted, owner_id=request_owner(request).pk
        )
        if not runs and not owned_tasks(request).filter(pk=self.kwargs["pk"]).exists():
            raise Http404("No Task matches the given query.")
        self.pagination.settle(total)
        return self.get_paginated_response(runs)


class OwnRunFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Run.Status.choices)
    task = django_filters.UUIDFilter(field_name="task_id", help_text="One task's runs.")
    scheduled_after = UtcIsoDateTimeFilter(
        field_name="scheduled_at", lookup_expr="gte", help_text="scheduled_at at or after"
    )
    scheduled_before = UtcIsoDateTimeFilter(
        field_name="scheduled_at", lookup_expr="lt", help_text="scheduled_at before"
    )

    class Meta:
        model = Run
        fields = ["status", "task", "scheduled_after", "scheduled_before"]


@extend_schema_view(
    get=extend_schema(
        summary="List the caller's runs across tasks",
        description="Paginated as the task list is, newest occurrence first by default.",
        responses={200: RunSerializer(many=True), 400: ERRORS[400], 401: ERRORS[401]},
    )
)
class RunListView(PagedListView):
    """GET /runs: the caller's runs of every task, by run_owner_scheduled_idx."""

    serializer_class = RunSerializer  # the schema; the page itself is built by json_sql.runs_json
    filterset_class = OwnRunFilter
    ordering_fields = ["scheduled_at", "finished_at"]
    ordering = ["-scheduled_at"]

    def get_queryset(self) -> QuerySet[Run]:
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        return visible_runs(self.request)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ids = self.filter_queryset(self.get_queryset()).values_list("id", flat=True)
        page = self.pagination.page_query(ids, request)  # selected and counted by the JSON's
        runs, total = runs_page_json(
            page, self.pagination.counted, owner_id=request_owner(request).pk
        )
        self.pagination.settle(total)
        return self.get_paginated_response(runs)


class RunDetailView(generics.RetrieveAPIView):
    serializer_class = RunSerializer  # the schema; the run itself is built by json_sql.runs_json

    def get_queryset(self) -> QuerySet[Run]:
        return visible_runs(self.request)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        found = runs_json([kwargs["pk"]], owner_id=request_owner(request).pk)
        if not found:
            raise Http404("No Run matches the given query.")
        return Response(found[0])


class RunActionView(APIView):
    """POST /runs/{id}/cancel|retry."""

    verb = ""
    token_scopes = {"POST": ("run",)}  # a service token needs `run` (accounts/token_auth.py)

    @extend_schema(request=None, responses={200: RunSerializer, **ERRORS, **CONFLICT})
    def post(self, request: Request, pk: Any) -> Response:
        run = get_object_or_404(visible_runs(request).select_related("task"), pk=pk)
        access.require(request_owner(request), run, access.EDITOR, team_id=run.task.team_id)
        now = db_now()
        if self.verb == "cancel":
            run = run_actions.cancel_run(run=run, now=now)
        else:
            run = run_actions.retry_run(run=run, now=now)
        return run_response(request, run)


# What each action answers: the task (pause, resume), or the run it made or skipped.
ACTION_RESPONSES: dict[str, dict[int, Any]] = {
    "pause": {200: TaskOutputSerializer},
    "resume": {200: TaskOutputSerializer},
    "run-now": {201: RunSerializer},
    "skip-next": {200: RunSerializer},
    "cancel": {200: RunSerializer},
    "retry": {200: RunSerializer},
}


def action_view(base: type[APIView], verb: str) -> Any:
    """The view of one action verb, with that verb's own answers in the schema. An action takes
    no body: a member sent is a 400 naming it (before the action, which then does nothing)."""
    responses = {**ACTION_RESPONSES[verb], **ERRORS, **CONFLICT}
    schema = extend_schema_view(post=extend_schema(request=None, responses=responses))
    view: type[APIView] = type(
        f"{base.__name__}_{verb}", (base,), {"verb": verb, "initial": _initial_without_body}
    )
    return schema(view).as_view()


def _initial_without_body(self: APIView, request: Request, *args: Any, **kwargs: Any) -> None:
    APIView.initial(self, request, *args, **kwargs)  # authentication and permissions first
    if isinstance(request.data, Mapping):
        unknown = unknown_fields(request.data, ())
    else:
        unknown = {"non_field_errors": ["This action takes no body."]} if request.data else {}
    if unknown:
        raise serializers.ValidationError(unknown)


PREVIEW_OUTPUT = inline_serializer(
    "SchedulePreviewOutput",
    {
        "next_runs": serializers.ListField(child=serializers.DateTimeField()),
        "describe": serializers.CharField(help_text="The schedule in words."),
        # Occurrences among them that will not run: recorded skipped with this reason.
        "excluded": serializers.ListField(
            child=inline_serializer(
                "ExcludedOccurrence",
                {"at": serializers.DateTimeField(), "reason": serializers.CharField()},
            )
        ),
        # The normalized schedule, with the misfire grace that applies (a recurring one).
        "schedule": ScheduleField(read_only=True),
    },
)


class SchedulePreviewView(APIView):
    token_scopes = {"POST": ("read", "tasksets:apply")}  # changes nothing

    @extend_schema(request=PreviewSerializer, responses={200: PREVIEW_OUTPUT, **ERRORS})
    def post(self, request: Request) -> Response:
        now = db_now()
        serializer = PreviewSerializer(data=request.data, context={"now": now, "request": request})
        serializer.is_valid(raise_exception=True)
        schedule = serializer.validated_data["schedule"]
        count = serializer.validated_data["count"]
        calendars = occurrences.load_calendars([schedule])
        times, skipped = occurrences.preview(schedule, now=now, count=count, calendars=calendars)
        # The normalized schedule, with the misfire grace that applies (a recurring one).
        return Response(
            {
                "next_runs": RawJSON(iso_json(times)),
                "describe": describe(schedule),
                "excluded": [
                    {"at": at.isoformat().replace("+00:00", "Z"), "reason": reason}
                    for at, reason in skipped
                ],
                "schedule": occurrences.shown_schedule(schedule),
            }
        )
