"""The request body of creating or changing a task, as the schema declares it.

The schema declares one body type per operation: client generators choke on an operation with
two (openapi-python-client 0.29 emits a client that does not import). So the task routes
declare JSON, while an executable's upload keeps working there as docs/api.md says (multipart, part
`file`, with objects and lists as JSON text, task_fields.JSON_TEXT_FIELDS; UPLOAD_NOTE says so), and
`POST /api/v1/tasks/upload` declares the multipart form alone (TaskUploadBody).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from tasks.api.serializers import PriorityField, TaskInputSerializer
from tasks.api.strict import ChoiceField
from tasks.models import Task


@extend_schema_serializer(component_name="TaskInput")
class TaskJSONBody(TaskInputSerializer):
    """TaskInputSerializer without `file`: a JSON body cannot carry the upload."""

    file = None  # type: ignore[assignment]  # DRF drops an inherited field set to None


TASK_BODY = {"application/json": TaskJSONBody}


class TaskUploadBody(serializers.Serializer):
    """POST /api/v1/tasks/upload: an executable task and its file, as multipart form fields."""

    file = serializers.FileField(help_text="The executable itself.")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    dedup_key = serializers.CharField(max_length=200, required=False)
    payload = serializers.CharField(
        required=False, help_text='JSON text of an ExecutablePayload: {"args"?, "env"?}.'
    )
    schedule = serializers.CharField(
        required=False,
        help_text="JSON text of a schedule (OnceSchedule ... CronSchedule), e.g. "
        '{"type": "once", "delay": 60}.',
    )
    priority = PriorityField(required=False)
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, required=False)
    retry_backoff = serializers.CharField(
        required=False, help_text='JSON text: {"base": seconds, "cap": seconds}.'
    )
    timeout = serializers.FloatField(min_value=0.001, required=False)
    notify = serializers.CharField(required=False, help_text="JSON text: a list of entries.")
    resources = serializers.CharField(
        required=False, help_text='JSON text: {"cpu"?, "memory"?} (ResourceRequests).'
    )
    concurrency = serializers.CharField(
        required=False, help_text='JSON text: {"key", "limit", "scope"?} (Concurrency).'
    )
    rate_limit = serializers.CharField(
        required=False, help_text='JSON text: {"key", "limit", "per", "scope"?} (RateLimit).'
    )
    on_zombie = ChoiceField(choices=Task.OnZombie.choices, required=False)
    expect = serializers.CharField(required=False, help_text="JSON text: an Expect object.")
    team = serializers.SlugField(
        max_length=100, required=False, help_text="The team's slug (docs/api.md, Teams)."
    )


UPLOAD_BODY = {"multipart/form-data": TaskUploadBody}
UPLOAD_NOTE = (
    "An `executable` task's file is uploaded as `multipart/form-data` part `file`; the other "
    "fields are then form fields, the objects and lists among them (`payload`, `schedule`, "
    "`retry_backoff`, `notify`, `resources`, `concurrency`, `rate_limit`, `expect`) as JSON text. "
    "`POST /api/v1/tasks/upload` (tasks_upload) declares that form."
)
