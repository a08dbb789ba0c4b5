"""Task sets: PUT, GET and DELETE /api/v1/tasksets/{name} and its drift (docs/api.md)."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access
from accounts.models import Team
from scheduler_project.auth import request_owner
from scheduler_project.web.parsers import JSONParser
from tasks.api.bodies import TaskJSONBody
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.api.views import CONFLICT, ERRORS
from tasks.api.workflows import WorkflowInputSerializer
from tasks.db import db_now
from tasks.models import Task
from tasks.transitions import taskset_plan, taskset_workflows, tasksets
from tasks.transitions.creation import MAX_BATCH

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
KEY_HELP = "Names the task within its set: unique there, kept across applies."
TRUE = ("true", "1", "yes")


@extend_schema_serializer(component_name="TaskSetEntry")
class TaskSetEntryBody(TaskJSONBody):
    """A task of a set: the body of a task's create, with its `key` and what drift may keep."""

    # A set's tasks are in the set's team (`?team=<slug>`): an entry's `team` is refused as an
    # unknown field.
    team = None  # type: ignore[assignment]
    key = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$", help_text=KEY_HELP)
    ignore_changes = serializers.ListField(
        child=ChoiceField(choices=taskset_plan.IGNORABLE),
        required=False,
        help_text="Fields changed outside the set that an apply keeps (e.g. `status`: an "
        "operator's pause).",
    )

    def validate_kind(self, value: str) -> str:
        if value == Task.Kind.EXECUTABLE:
            raise serializers.ValidationError(
                "A set declares JSON tasks; executables are uploaded one at a time."
            )
        return value

    def validate_dedup_key(self, value: str | None) -> str | None:
        if value:
            raise serializers.ValidationError("A task of a set is named by its `key`.")
        return value


@extend_schema_serializer(component_name="TaskSetWorkflowEntry")
class TaskSetWorkflowEntryBody(WorkflowInputSerializer):
    """A workflow of a set: the body of a workflow's create, with its `key`; `name` defaults to
    the key."""

    key = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$",
        help_text="Names the workflow within its set: unique there, kept across applies.",
    )
    name = serializers.CharField(max_length=200, required=False)


class TaskSetBody(StrictSerializer):
    tasks = serializers.ListField(child=serializers.DictField(), max_length=MAX_BATCH)
    workflows = serializers.ListField(
        child=serializers.DictField(), max_length=MAX_BATCH, required=False
    )


def declared_tasks(
    request: Request, now: Any, team: Team | None = None
) -> list[taskset_plan.Declared]:
    """The body's entries validated as a task's create validates them; the first bad entry is
    a 400 naming it by index and field (`{"tasks": {"3": {"schedule": {...}}}}`)."""
    outer = TaskSetBody(data=request.data)
    outer.is_valid(raise_exception=True)
    declared: list[taskset_plan.Declared] = []
    seen: set[str] = set()
    # The set's team is each task's, so `notify` is checked against its channels.
    context = {"now": now, "multipart": False, "request": request, "team": team}
    for index, body in enumerate(outer.validated_data["tasks"]):
        one = TaskSetEntryBody(data=body, context=context)
        if not one.is_valid():
            raise serializers.ValidationError({"tasks": {str(index): one.errors}})
        data = dict(one.validated_data)
        key = data.pop("key")
        if key in seen:
            message = f'"{key}" is declared twice; keys are unique within a set.'
            raise serializers.ValidationError({"tasks": {str(index): {"key": [message]}}})
        seen.add(key)
        ignore = data.pop("ignore_changes", [])
        data.setdefault("name", key)
        entry = {k: v for k, v in body.items() if k not in ("key", "ignore_changes")}
        declared.append(taskset_plan.Declared(key, entry, data, sorted(set(ignore))))
    return declared


def declared_workflows(
    request: Request, now: Any, team: Team | None = None
) -> list[taskset_workflows.DeclaredWorkflow]:
    """The body's `workflows` entries validated as a workflow's create validates them; the first
    bad entry is a 400 naming it by index (`{"workflows": {"0": {"steps": {...}}}}`). Absent:
    none (the file declares the set whole)."""
    outer = TaskSetBody(data=request.data)
    outer.is_valid(raise_exception=True)
    bodies = outer.validated_data.get("workflows", [])
    if bodies and team is not None:
        message = "A team's set declares no workflows: a workflow belongs to its owner alone."
        raise serializers.ValidationError({"workflows": [message]})
    declared: list[taskset_workflows.DeclaredWorkflow] = []
    seen: set[str] = set()
    for index, body in enumerate(bodies):
        one = TaskSetWorkflowEntryBody(data=body, context={"now": now, "request": request})
        if not one.is_valid():
            raise serializers.ValidationError({"workflows": {str(index): one.errors}})
        data = dict(one.validated_data)
        key = data.pop("key")
        if key in seen:
            message = f'"{key}" is declared twice; keys are unique within a set.'
            raise serializers.ValidationError({"workflows": {str(index): {"key": [message]}}})
        seen.add(key)
        data.setdefault("name", key)
        entry = {k: v for k, v in body.items() if k != "key"}
        declared.append(taskset_workflows.DeclaredWorkflow(key, entry, data))
    return declared


def set_team(request: Request, need: str = access.EDITOR) -> Team | None:
    """The team of the set the request names (`?team=<slug>`; a service account's own team
    when it names none), or None for the caller's own set: 404 for a team the caller is no
    member of (as for a set that does not exist), 403 for a role less than `need`."""
    user = request_owner(request)
    slug = request.query_params.get("team")
    if slug is None:
        return access.default_team(user)
    try:
        return access.team_for(user, slug, need=need)
    except serializers.ValidationError:
        raise NotFound("No task set of that name.") from None


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in TRUE


def _name(name: str) -> str:
    if name == "schema":  # GET /api/v1/tasksets/schema is the file's JSON Schema
        raise serializers.ValidationError({"name": ["`schema` is reserved."]})
    if not NAME.match(name):
        raise serializers.ValidationError(
            {"name": ["Letters, digits, '.', '_' and '-', at most 100, starting alphanumeric."]}
        )
    return name


CHANGE = inline_serializer(
    "TaskSetChange", {"from": serializers.JSONField(), "to": serializers.JSONField()}
).__class__


def changes_field() -> serializers.DictField:
    """`{"field": {"from", "to"}}`: one component, a fresh field per use (a field is bound to
    one parent)."""
    return serializers.DictField(child=CHANGE())


PLAN = inline_serializer(
    "TaskSetPlan",
    {
        "name": serializers.CharField(),
        "version": serializers.IntegerField(help_text="Applies so far (after this one)."),
        "create": inline_serializer(
            "TaskSetCreate",
            {
                "key": serializers.CharField(),
                "id": serializers.UUIDField(allow_null=True, help_text="null in a dry run"),
                "task": serializers.DictField(help_text="The fields the task gets."),
            },
            many=True,
        ),
        "update": inline_serializer(
            "TaskSetUpdate",
            {
                "key": serializers.CharField(),
                "id": serializers.UUIDField(),
                "changes": changes_field(),
            },
            many=True,
        ),
        "delete": inline_serializer(
            "TaskSetDelete",
            {"key": serializers.CharField(), "id": serializers.UUIDField()},
            many=True,
        ),
        "unchanged": serializers.IntegerField(),
        "workflows": inline_serializer(
            "TaskSetWorkflowPlan",
            {
                "create": inline_serializer(
                    "TaskSetWorkflowCreate",
                    {
                        "key": serializers.CharField(),
                        "id": serializers.UUIDField(allow_null=True, help_text="null in a dry run"),
                        "workflow": serializers.DictField(
                            help_text="The fields the workflow gets."
                        ),
                    },
                    many=True,
                ),
                "update": inline_serializer(
                    "TaskSetWorkflowUpdate",
                    {
                        "key": serializers.CharField(),
                        "id": serializers.UUIDField(),
                        "changes": changes_field(),
                    },
                    many=True,
                ),
                "delete": inline_serializer(
                    "TaskSetWorkflowDelete",
                    {"key": serializers.CharField(), "id": serializers.UUIDField()},
                    many=True,
                ),
                "unchanged": serializers.IntegerField(),
            },
            help_text="The same for the set's workflows.",
        ),
    },
)
DRY_RUN = OpenApiParameter("dry_run", bool, description="answer the plan, change nothing")
FORCE = OpenApiParameter("force", bool, description="also cancel running runs of removed tasks")
SERIALISED = (
    "Applies of one set serialise on the set's row lock: a second waits for the first and "
    "plans against its result."
)


class TaskSetView(APIView):
    parser_classes = [JSONParser]
    # A service token reads a set with `read` or `tasksets:apply`, changes it with the latter.
    token_scopes = {
        "GET": ("read", "tasksets:apply"),
        "PUT": ("tasksets:apply",),
        "DELETE": ("tasksets:apply",),
    }

    @extend_schema(
        summary="Show a task set",
        description="The set's tasks by key, each with its id, status and the entry as last "
        "applied; `version` counts the applies.",
        responses={
            200: inline_serializer(
                "TaskSet",
                {
                    "name": serializers.CharField(),
                    "version": serializers.IntegerField(),
                    "updated_at": serializers.DateTimeField(),
                    "tasks": inline_serializer(
                        "TaskSetMember",
                        {
                            "key": serializers.CharField(),
                            "id": serializers.UUIDField(),
                            "status": serializers.CharField(),
                            "entry": serializers.DictField(help_text="As last applied."),
                        },
                        many=True,
                    ),
                    "workflows": inline_serializer(
                        "TaskSetWorkflowMember",
                        {
                            "key": serializers.CharField(),
                            "id": serializers.UUIDField(),
                            "entry": serializers.DictField(help_text="As last applied."),
                        },
                        many=True,
                    ),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str) -> Response:
        team = set_team(request, access.VIEWER)
        taskset = tasksets.find_taskset(owner=request_owner(request), name=name, team=team)
        if taskset is None:
            raise NotFound("No task set of that name.")
        members = taskset_plan.members(taskset)
        return Response(
            {
                "name": taskset.name,
                "version": taskset.version,
                "updated_at": taskset.updated_at,
                "tasks": [
                    {
                        "key": key,
                        "id": str(task.pk),
                        "status": task.status,
                        "entry": (task.taskset_entry or {}).get("entry", {}),
                    }
                    for key, task in members.items()
                ],
                "workflows": [
                    {
                        "key": key,
                        "id": str(workflow.pk),
                        "entry": (workflow.taskset_entry or {}).get("entry", {}),
                    }
                    for key, workflow in taskset_workflows.members(taskset).items()
                ],
            }
        )

    @extend_schema(
        summary="Declare a task set whole",
        description="Creates what is new, updates what changed (also what was changed outside "
        "the set), cancels what is gone: one transaction, all or nothing. " + SERIALISED,
        request=inline_serializer(
            "TaskSetInput",
            {
                "tasks": TaskSetEntryBody(many=True),
                "workflows": TaskSetWorkflowEntryBody(many=True, required=False),
            },
        ),
        parameters=[DRY_RUN, FORCE],
        responses={200: PLAN, **ERRORS, **CONFLICT},
    )
    def put(self, request: Request, name: str) -> Response:
        owner = request_owner(request)
        now = db_now()
        team = set_team(request)
        declared = declared_tasks(request, now, team)
        workflows = declared_workflows(request, now, team)
        if _flag(request, "dry_run"):
            return Response(
                tasksets.dry_run_taskset(
                    owner=owner, name=_name(name), declared=declared, team=team, workflows=workflows
                )
            )
        _, carried_out = tasksets.apply_taskset(
            owner=owner,
            name=_name(name),
            declared=declared,
            force=_flag(request, "force"),
            now=now,
            team=team,
            workflows=workflows,
        )
        return Response(carried_out)

    @extend_schema(
        summary="Delete a task set and cancel its tasks",
        description="Cancels every task of the set (as deleting each would) and removes the "
        "set; answers the plan carried out. With `dry_run`, the plan alone. " + SERIALISED,
        parameters=[DRY_RUN, FORCE],
        responses={200: PLAN, **ERRORS, **CONFLICT},
    )
    def delete(self, request: Request, name: str) -> Response:
        result = tasksets.delete_taskset(
            owner=request_owner(request),
            team=set_team(request),
            name=name,
            force=_flag(request, "force"),
            dry_run=_flag(request, "dry_run"),
            now=db_now(),
        )
        if result is None:
            raise NotFound("No task set of that name.")
        return Response(result)


FIELD_DRIFT = inline_serializer(
    "TaskSetFieldDrift",
    {
        "declared": serializers.JSONField(help_text="As the last apply left it."),
        "actual": serializers.JSONField(),
        "ignored": serializers.BooleanField(help_text="Kept by the entry's `ignore_changes`."),
    },
).__class__


def drift_fields() -> serializers.DictField:
    """`{"field": {"declared", "actual", "ignored"}}`: one component, a fresh field per use."""
    return serializers.DictField(child=FIELD_DRIFT())


class TaskSetDriftView(APIView):
    token_scopes = {"GET": ("read", "tasksets:apply")}

    @extend_schema(
        summary="A task set's drift: what changed outside it since the last apply",
        description="Each task whose fields differ from what the last apply left (changed "
        "through the API or the admin; a pause shows as `status`), and each task deleted "
        "outside the set. The next apply's plan shows them as updates back to the file (or as "
        "creates), except fields the entry's `ignore_changes` keeps.",
        responses={
            200: inline_serializer(
                "TaskSetDrift",
                {
                    "name": serializers.CharField(),
                    "drift": inline_serializer(
                        "TaskSetTaskDrift",
                        {
                            "key": serializers.CharField(),
                            "id": serializers.UUIDField(),
                            "deleted": serializers.BooleanField(),
                            "fields": drift_fields(),
                        },
                        many=True,
                    ),
                    "workflows": inline_serializer(
                        "TaskSetWorkflowDrift",
                        {
                            "key": serializers.CharField(),
                            "id": serializers.UUIDField(),
                            "deleted": serializers.BooleanField(),
                            "fields": drift_fields(),
                        },
                        many=True,
                    ),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str) -> Response:
        team = set_team(request, access.VIEWER)
        taskset = tasksets.find_taskset(owner=request_owner(request), name=name, team=team)
        if taskset is None:
            raise NotFound("No task set of that name.")
        return Response(
            {
                "name": name,
                "drift": taskset_plan.drift(taskset),
                "workflows": taskset_workflows.drift(taskset),
            }
        )
