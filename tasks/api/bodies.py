"""The request body of creating or changing a task, as the schema declares it (issue 17).

The schema declares JSON alone: client generators choke on one operation with two body types
(openapi-python-client 0.29 emits a client that does not import). An executable's upload keeps
working as API.md says, multipart with part `file` and `payload`, `schedule` and `notify` as
JSON text; UPLOAD_NOTE tells readers of the schema so.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer

from tasks.api.serializers import TaskInputSerializer


@extend_schema_serializer(component_name="TaskInput")
class TaskJSONBody(TaskInputSerializer):
    """TaskInputSerializer without `file`: a JSON body cannot carry the upload."""

    file = None  # type: ignore[assignment]  # DRF drops an inherited field set to None


TASK_BODY = {"application/json": TaskJSONBody}
UPLOAD_NOTE = (
    "An `executable` task's file is uploaded as `multipart/form-data` part `file`; the other "
    "fields are then form fields, with `payload`, `schedule` and `notify` as JSON text."
)
