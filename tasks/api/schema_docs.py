"""What the OpenAPI schema says about a task's `payload` and `schedule`, and the examples.

Validation stays where it is (tasks/api/payloads.py, tasks/schedules.py): these schemas only
describe the canonical form those validators accept and the API returns, so one set of
components serves requests and responses alike. Each `oneOf` branch closes its properties
(`additionalProperties: false`) and requires what tells it apart (a handler's `name`, an http
payload's `url`, a schedule's `type`), so every real value matches exactly one branch.
scheduler_project/schema.py registers them as components when the schema is generated, so the
handler names are the ones registered in this process (SCHEDULER_HANDLER_MODULES included).
"""

from __future__ import annotations

from typing import Any

from tasks import handlers, schedules
from tasks.api.bodies import UPLOAD_NOTE
from tasks.api.payloads import HTTP_METHODS

Schema = dict[str, Any]


def _ref(component: str, **meta: Any) -> Schema:
    """A property naming one of enum_components() (allOf: OpenAPI 3.0 ignores $ref siblings)."""
    return {"allOf": [{"$ref": f"#/components/schemas/{component}"}], **meta}


def enum_components() -> dict[str, Schema]:
    """The choice sets, each a component of its own with the name a generated client shows."""
    return {
        "HandlerName": {
            "type": "string",
            "enum": handlers.names(),
            "description": "The handlers registered in this deployment.",
        },
        "HttpMethod": {"type": "string", "enum": list(HTTP_METHODS)},
        "Weekday": {"type": "string", "enum": list(schedules.WEEKDAYS)},
        "MisfirePolicy": {"type": "string", "enum": list(schedules.MISFIRE_POLICIES)},
        "OverlapPolicy": {"type": "string", "enum": list(schedules.OVERLAP_POLICIES)},
    }


# --- payload ----------------------------------------------------------------------------------

BUILT_IN_HANDLERS = {
    "noop": "does nothing and succeeds",
    "echo": "succeeds with its `args` as the run's output (JSON)",
    "sleep": "waits `args.seconds` (0 to 86400, default 1), then succeeds",
    "fail": "always fails, with `args.message` as the error",
}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 100}


def handler_payload() -> Schema:
    names = handlers.names()
    built_in = "; ".join(f"`{n}` {what}" for n, what in BUILT_IN_HANDLERS.items() if n in names)
    return {
        "type": "object",
        "description": (
            "For `kind: handler`: call a Python function registered in the service by name, as "
            "`fn(context, **args)`. A deployment adds its own with SCHEDULER_HANDLER_MODULES."
        ),
        "properties": {
            "name": _ref("HandlerName", description=f"A registered handler. Built in: {built_in}."),
            "args": {
                "type": "object",
                "additionalProperties": True,
                "description": "Keyword arguments for the handler (default `{}`).",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
        "example": {"name": "echo", "args": {"hello": "world"}},
    }


HTTP_PAYLOAD: Schema = {
    "type": "object",
    "description": (
        "For `kind: http`: one HTTP request per attempt, with headers `Idempotency-Key` and "
        "`X-Scheduler-Run-Id` added. The attempt succeeds when the answer's status is one of "
        "`expect_status`. The URL must reach a public address (or a host in "
        "SCHEDULER_OUTBOUND_ALLOW)."
    ),
    "properties": {
        "url": {
            "type": "string",
            "maxLength": 2000,
            "description": "An `http` or `https` URL with a host.",
        },
        "method": _ref(
            "HttpMethod", default="GET", description="The HTTP method (case-insensitive on input)."
        ),
        "headers": {**STRING_MAP, "description": "Request headers (default `{}`)."},
        "body": {
            "oneOf": [
                {"type": "string", "description": "Sent as is."},
                {"type": "object", "additionalProperties": True, "description": "Sent as JSON."},
                {"type": "array", "items": {}, "description": "Sent as JSON."},
            ],
            "description": "The request body: a string is sent as is, an object or array as JSON.",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": True,
            "minimum": 0,
            "maximum": 3600,
            "description": "Seconds to wait for the answer; the task's `timeout` caps it.",
        },
        "expect_status": {
            "type": "array",
            "items": {"type": "integer", "minimum": 100, "maximum": 599},
            "minItems": 1,
            "description": "The statuses that count as success (default any 2xx).",
        },
    },
    "required": ["url"],
    "additionalProperties": False,
    "example": {
        "method": "POST",
        "url": "https://example.com/hooks/nightly-report",
        "headers": {"Authorization": "Bearer s3cr3t"},
        "body": {"report": "nightly"},
        "timeout": 30,
        "expect_status": [200, 202],
    },
}

EXECUTABLE_PAYLOAD: Schema = {
    "type": "object",
    "description": (
        "For `kind: executable`: how the uploaded file (multipart part `file`) is started, in "
        "the sandbox."
    ),
    "properties": {
        "args": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": 100,
            "description": "Command-line arguments (default `[]`).",
        },
        "env": {
            **STRING_MAP,
            "description": "Environment variables added to the SCHEDULER_* ones (default `{}`).",
        },
    },
    "additionalProperties": False,
    "example": {"args": ["--verbose"], "env": {"REPORT_DAY": "monday"}},
}

PAYLOAD_DESCRIPTION = (
    "What a run does; its shape depends on `kind` (handler, http or executable). Absent: `{}`, "
    "which suits an executable only."
)

# --- schedule ---------------------------------------------------------------------------------

_TEN_YEARS = schedules.MAX_SECONDS
_INSTANT = (
    "An ISO 8601 date-time; without an offset it is local time in `timezone`. Answers are in "
    "UTC (`Z`)."
)
_AT = {
    "type": "string",
    "pattern": r"^\d{1,2}:\d{2}(:\d{2})?$",
    "description": "Local time of day in `timezone`, `HH:MM` or `HH:MM:SS` (24-hour clock).",
}
TIMEZONE = {
    "type": "string",
    "default": "UTC",
    "description": "An IANA time zone name such as `Europe/Berlin` (case-insensitive).",
}
RECURRING_FIELDS: Schema = {
    "timezone": TIMEZONE,
    "start_at": {
        "type": "string",
        "nullable": True,
        "description": "No occurrence before this instant (inclusive). " + _INSTANT,
    },
    "end_at": {
        "type": "string",
        "nullable": True,
        "description": "No occurrence after this instant (inclusive). " + _INSTANT,
    },
    "max_runs": {
        "type": "integer",
        "minimum": 1,
        "maximum": schedules.MAX_RUNS,
        "nullable": True,
        "description": "Stop after this many occurrences (default: no limit).",
    },
    "jitter": {
        "type": "number",
        "minimum": 0,
        "maximum": schedules.MAX_JITTER,
        "default": 0,
        "description": "Each run starts up to this many seconds late, by a fixed per-occurrence "
        "offset, to spread load.",
    },
    "misfire": _ref(
        "MisfirePolicy",
        default="run_once",
        description="Occurrences missed while nothing could run them (an outage): run the "
        "latest once (`run_once`), skip them (`skip`), or run each (`run_all`, at most "
        f"{schedules.RUN_ALL_CAP}).",
    ),
    "misfire_grace": {
        "type": "number",
        "minimum": 1,
        "maximum": _TEN_YEARS,
        "nullable": True,
        "description": "Seconds an occurrence may start late before it counts as missed; null "
        "means the deployment's TASKS_MISFIRE_GRACE_SECONDS, which answers show.",
    },
    "overlap": _ref(
        "OverlapPolicy",
        default="allow",
        description="When an occurrence is due while the previous run still runs: run both "
        "(`allow`), skip the new one (`skip`), or cancel the previous one (`cancel_previous`).",
    ),
    "anchor": {
        "type": "string",
        "nullable": True,
        "description": "Set by the service: when a schedule without `start_at` was defined (its "
        "occurrences begin after it). Send it back unchanged to keep the phase.",
    },
    "exclude": {
        "type": "array",
        "maxItems": 20,
        "items": {"type": "string", "format": "uuid"},
        "description": "Ids of the caller's calendars: an occurrence on one of their holidays or "
        "dates, or inside one of their windows, is recorded `skipped` with the reason; business "
        "days skip their holidays and dates. Shown only when given.",
    },
    "exclude_windows": {
        "type": "array",
        "maxItems": 100,
        "items": {
            "type": "object",
            "properties": {
                "start": {"type": "string", "description": "Date-time; without an offset, local."},
                "end": {"type": "string", "description": "Date-time, later than `start`."},
            },
            "required": ["start", "end"],
            "additionalProperties": False,
        },
        "description": "Freeze windows: an occurrence inside one (start inclusive, end "
        "exclusive) is recorded `skipped` with the reason. Shown only when given, in UTC.",
    },
}


ALLOW_EVERY_SECOND: Schema = {
    "type": "boolean",
    "default": False,
    "description": "Required (true) when the schedule fires every second: a cron expression "
    "whose seconds field is every second, an rrule at FREQ=SECONDLY with INTERVAL 1 (or a "
    "BYSECOND of all 60), an interval of 1. Shown only when true.",
}
BUSINESS_DAYS_ONLY: Schema = {
    "type": "boolean",
    "default": False,
    "description": "Only on business days: Monday to Friday, and not a holiday or date of the "
    "calendars in `exclude`. Shown only when true.",
}


def _type(kind: str, description: str) -> Schema:
    # The branch's description again: ReDoc shows a discriminated branch by its fields alone.
    return {"type": "string", "enum": [kind], "description": description}


def _recurring(
    kind: str, title: str, description: str, own: Schema, required: list[str], example: Schema
) -> Schema:
    return {
        "type": "object",
        "description": description,
        "properties": {"type": _type(kind, description), **own, **RECURRING_FIELDS},
        "required": ["type", *required],
        "additionalProperties": False,
        "example": {"type": kind, **example},
    }


_ONCE = (
    "One run, at `run_at` or `delay` seconds from now (give one, not both; neither means now). "
    "Answers show `run_at` in UTC, with `timezone` when one other than UTC was given."
)
SCHEDULES: dict[str, Schema] = {
    "once": {
        "type": "object",
        "description": _ONCE,
        "properties": {
            "type": _type("once", _ONCE),
            "run_at": {"type": "string", "description": "When to run. " + _INSTANT},
            "delay": {
                "type": "number",
                "minimum": 0,
                "maximum": _TEN_YEARS,
                "description": "Seconds from now (requests only).",
            },
            "timezone": {**TIMEZONE, "description": "The zone of a `run_at` without offset."},
        },
        "required": ["type"],
        "additionalProperties": False,
        "example": {"type": "once", "run_at": "2030-01-31T09:00:00Z"},
    },
    "interval": _recurring(
        "interval",
        "Interval",
        "Every `every` seconds of absolute time (DST changes nothing), from `start_at` or, "
        "without it, from when the schedule was defined.",
        {
            "every": {
                "type": "integer",
                "minimum": 1,
                "maximum": _TEN_YEARS,
                "description": "Seconds between occurrences.",
            },
            "allow_every_second": ALLOW_EVERY_SECOND,
        },
        ["every"],
        {"every": 300, "jitter": 5, "misfire": "skip"},
    ),
    "daily": _recurring(
        "daily",
        "Daily",
        "Every day at `at`, local time in `timezone` (DST: docs/schedules.md).",
        {"at": _AT, "business_days_only": BUSINESS_DAYS_ONLY},
        ["at"],
        {"at": "09:00:00", "timezone": "America/New_York"},
    ),
    "weekly": _recurring(
        "weekly",
        "Weekly",
        "On the given weekdays at `at`, local time in `timezone`.",
        {
            "days": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Weekday"},
                "minItems": 1,
                "description": 'Weekdays, e.g. `["mon", "fri"]` (full names are accepted).',
            },
            "at": _AT,
            "business_days_only": BUSINESS_DAYS_ONLY,
        },
        ["days", "at"],
        {"days": ["mon", "wed", "fri"], "at": "07:30:00", "timezone": "Europe/Berlin"},
    ),
    "monthly": _recurring(
        "monthly",
        "Monthly",
        "Each month at `at`, on day `day` (a day past a month's end runs on its last day), on "
        "the `week`-th `weekday`, or on the `business_day`-th business day: give one of the "
        "three.",
        {
            "day": {
                "type": "integer",
                "minimum": -1,
                "maximum": 31,
                "description": "1 to 31, or -1 for the last day of the month (0 is refused).",
            },
            "weekday": _ref(
                "Weekday",
                description='With `week`: `{"weekday": "fri", "week": -1}` is the last Friday.',
            ),
            "week": {
                "type": "integer",
                "minimum": -5,
                "maximum": 5,
                "description": "1..5: the n-th `weekday` of the month; -1..-5: counted from its "
                "end. A month without a fifth one has no occurrence.",
            },
            "business_day": {
                "type": "integer",
                "minimum": -23,
                "maximum": 23,
                "description": "The n-th business day (Monday to Friday, not a holiday of the "
                "calendars in `exclude`); -1 is the last.",
            },
            "at": _AT,
        },
        ["at"],
        {"day": -1, "at": "23:00:00", "timezone": "Asia/Tokyo"},
    ),
    "cron": _recurring(
        "cron",
        "Cron",
        "A cron expression in `timezone`. A bare expression string in place of the schedule "
        "object is read as this type.",
        {
            "expression": {
                "type": "string",
                "maxLength": 200,
                "description": "Five fields (minute hour day month weekday), or six with "
                "seconds first, e.g. `*/15 * * * *`.",
            },
            "allow_every_second": ALLOW_EVERY_SECOND,
        },
        ["expression"],
        {"expression": "0 9 * * mon-fri", "timezone": "Europe/Berlin"},
    ),
    "rrule": _recurring(
        "rrule",
        "Rrule",
        "An RFC 5545 recurrence rule, wall-clock in `timezone` (DST: docs/schedules.md). Parts "
        "it leaves out come from `start_at`, or from midnight of the day the schedule was "
        "defined.",
        {
            "rule": {
                "type": "string",
                "maxLength": 500,
                "description": "`FREQ=...;BYDAY=...`: FREQ, INTERVAL, COUNT (up to 10,000), UNTIL, "
                "WKST, BYMONTH, BYWEEKNO, BYYEARDAY, BYMONTHDAY, BYDAY, BYHOUR, BYMINUTE, "
                "BYSECOND, BYSETPOS. A 400 names the part (`schedule.rule.BYSETPOS`).",
            },
            "exdates": {
                "type": "array",
                "maxItems": 1000,
                "items": {"type": "string"},
                "description": "Occurrences left out: a date (`2026-12-24`, every occurrence "
                "that local day) or a date-time (that occurrence; no offset means local time). "
                "Answers show dates and UTC instants.",
            },
            "allow_every_second": ALLOW_EVERY_SECOND,
        },
        ["rule"],
        {"rule": "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1;BYHOUR=17", "timezone": "Europe/Berlin"},
    ),
}
SCHEDULE_DESCRIPTION = (
    "When the task runs; the `type` says which fields apply. Absent or null: once, now. Answers "
    "show the normalized schedule (every field, defaults filled in)."
)


def component_name(kind: str, suffix: str) -> str:
    return f"{kind.capitalize()}{suffix}"


def payload_components() -> dict[str, Schema]:
    return {
        "HandlerPayload": handler_payload(),
        "HttpPayload": HTTP_PAYLOAD,
        "ExecutablePayload": EXECUTABLE_PAYLOAD,
    }


def schedule_components() -> dict[str, Schema]:
    return {component_name(kind, "Schedule"): schema for kind, schema in SCHEDULES.items()}


# --- operation examples -----------------------------------------------------------------------

# Request bodies, each one the service accepts (tests send them): name -> (summary, body).
CREATE_EXAMPLES: dict[str, tuple[str, Schema]] = {
    "handler_once": (
        "A handler in 5 seconds",
        {
            "name": "hello",
            "kind": "handler",
            "payload": {"name": "echo", "args": {"hello": "world"}},
            "schedule": {"type": "once", "delay": 5},
        },
    ),
    "http_cron": (
        "An HTTP call on weekday mornings, Berlin time",
        {
            "name": "nightly report",
            "kind": "http",
            "payload": HTTP_PAYLOAD["example"],
            "schedule": SCHEDULES["cron"]["example"],
            "priority": "high",
            "max_attempts": 3,
            "retry_backoff": {"base": 10, "cap": 300},
            "timeout": 60,
        },
    ),
    "handler_interval": (
        "A handler every 5 minutes, deduplicated",
        {
            "name": "sweep",
            "dedup_key": "sweep-v1",
            "kind": "handler",
            "payload": {"name": "sleep", "args": {"seconds": 2}},
            "schedule": SCHEDULES["interval"]["example"],
        },
    ),
}

PREVIEW_EXAMPLES: dict[str, tuple[str, Schema]] = {
    kind: (f"A {kind} schedule", {"schedule": schema["example"], "count": 3})
    for kind, schema in SCHEDULES.items()
}
OPERATION_EXAMPLES: dict[str, dict[str, tuple[str, Schema]]] = {
    "tasks_create": CREATE_EXAMPLES,
    "seed_task_create": CREATE_EXAMPLES,
    "schedules_preview": PREVIEW_EXAMPLES,
}

# --- operations -------------------------------------------------------------------------------

_OWN = "Only the caller's own objects: another user's id answers 404, like an unknown one."
_TEAM = "A member's; anyone else gets 404. No service token (403)."
_PAGED = "Paginated (`count`, `next`, `previous`, `results`; `page`, `page_size` up to 500)."
_CHANGE = (
    "The change applies to every run not yet started; 409 while a one-time task's run is "
    "running. " + UPLOAD_NOTE
)
# operation id -> (summary, description); scheduler_project/schema.py's AutoSchema reads it.
_CALENDAR_CHANGE = (
    "Every task naming it is re-planned in the same transaction: its runs not started yet, and "
    "its future occurrences recorded as excluded, are planned again under the new calendar."
)
OPERATIONS: dict[str, tuple[str, str]] = {
    "auth_token": (
        "Get an access and a refresh token",
        "Exchange a username and password for a JWT pair; send the access token as "
        "`Authorization: Bearer <access>` on every other `/api/v1/` call. Wrong credentials "
        "answer 401.",
    ),
    "auth_token_refresh": (
        "Refresh the access token",
        "A new access token for a valid refresh token.",
    ),
    "tasks_list": (
        "List your tasks",
        "The caller's tasks, newest first unless `ordering` says otherwise. " + _PAGED,
    ),
    "tasks_create": (
        "Create a task",
        "Create a one-time or recurring task of kind `handler`, `http` or `executable`; "
        "`payload` and `schedule` take the shape their `kind` and `type` name (see the "
        "examples). 201 with the task; 200 with the existing task when the caller already has "
        "one with this `dedup_key`. " + UPLOAD_NOTE,
    ),
    "tasks_batch_create": (
        "Create many tasks at once",
        "Up to 1,000 task bodies (JSON, no executables), created all or none: the first bad "
        "body answers 400 by its index and field, and nothing is created.",
    ),
    "tasks_upload": (
        "Create an executable task with its file",
        "The multipart form of creating an executable task: part `file` is the program, the "
        "other fields are form fields (`payload`, `schedule`, `notify` as JSON text); `kind` "
        "defaults to `executable`.",
    ),
    "tasks_retrieve": (
        "Get a task",
        "The task with its next fire times (`next_runs`) and latest runs (`runs`). " + _OWN,
    ),
    "tasks_update": ("Replace a task's settings", _CHANGE),
    "tasks_partial_update": ("Change a task", "Only the fields sent change. " + _CHANGE),
    "tasks_destroy": (
        "Cancel a task",
        "No further runs; the task stays readable as `cancelled`. 409 while a run is running, "
        "unless `force=true`, which cancels that run too.",
    ),
    "tasks_pause": ("Pause a task", "No run starts until it is resumed; answers the task."),
    "tasks_resume": ("Resume a paused task", "Runs start again; answers the task."),
    "tasks_run_now": (
        "Run a task once now",
        "One extra run now; the schedule's cadence is unchanged. Answers the new run.",
    ),
    "tasks_skip_next": (
        "Skip a task's next occurrence",
        "The next planned run becomes `skipped`; answers it. 409 when there is none.",
    ),
    "tasks_backfill": (
        "Backfill a task's past occurrences",
        "A run for every occurrence of the task's schedule in [`start`, `end`) that has none "
        "yet, all in one transaction: `backfill: true`, never skipped as missed, claimed in "
        "`scheduled_at` order at the task's priority (or the lower `priority` given). An "
        "occurrence the schedule's exclusions leave out is recorded `skipped`. A repeat "
        "creates nothing twice. 201 when it made runs, 200 when every occurrence already had "
        "one. 400 names the field: `end` not after `start` or in the future, `start` before "
        "the schedule begins, more occurrences than `max_runs` (nothing is created), a "
        "`priority` above the task's, a one-time task (`schedule`). 409 for a paused, failed "
        "or cancelled task.",
    ),
    "tasks_runs_list": (
        "List a task's runs",
        "The task's runs, newest first; filter by `status`. " + _PAGED,
    ),
    "runs_retrieve": (
        "Get a run",
        "One run with its attempts and its idempotency key. " + _OWN,
    ),
    "runs_cancel": (
        "Cancel a run",
        "A scheduled run is cancelled; a running one is stopped (its process group killed) "
        "and recorded `cancelled`. 409 when the run has already finished.",
    ),
    "runs_retry": (
        "Retry a failed or cancelled run",
        "The run is scheduled again now with its attempts reset; 409 for any other status.",
    ),
    "schedules_preview": (
        "Preview a schedule",
        "The next `count` fire times of a schedule that will run, the occurrences among them "
        "its exclusions leave out (`excluded`: time and reason, up to `count`), and the "
        "schedule as the service normalizes it, without creating anything. 400 names what is "
        "wrong with the schedule.",
    ),
    "calendars_list": ("List your calendars", "By name. " + _PAGED),
    "calendars_create": (
        "Create a calendar",
        "Holidays of a country (and subdivision) from the `holidays` package, dates and freeze "
        "windows; schedules name it in `exclude`. Times without an offset are in its "
        "`timezone`.",
    ),
    "calendars_retrieve": ("Get a calendar", _OWN),
    "calendars_update": ("Replace a calendar", _CALENDAR_CHANGE),
    "calendars_partial_update": (
        "Change a calendar",
        "Only the fields sent change. " + _CALENDAR_CHANGE,
    ),
    "calendars_destroy": (
        "Delete a calendar",
        "409 while tasks that are not cancelled name it in `exclude`; `detail` names them.",
    ),
    "concurrency_keys_list": (
        "List your concurrency keys",
        "Your keys and the global ones, each with its limit, its runs running and its runs "
        "due and waiting. " + _PAGED,
    ),
    "concurrency_keys_create": (
        "Declare a concurrency key",
        "Creates the key, or sets its limit: a limit set here wins over the tasks'. Scope "
        "`global` (a key any user's task may name) is for operators (staff users) only; 200 "
        "when the key existed.",
    ),
    "concurrency_keys_retrieve": ("Get a concurrency key", _OWN),
    "concurrency_keys_partial_update": (
        "Change a concurrency key's limit",
        "The next claim applies it to every task of the key; runs already running go on.",
    ),
    "rate_limits_list": (
        "List your rate limits",
        "Your rate keys and the global ones, each with its limit and window, the starts in "
        "the window now (`used`), when the next run may start while it is full, and its runs "
        "due and waiting. " + _PAGED,
    ),
    "rate_limits_create": (
        "Declare a rate limit",
        "Creates the key, or sets its limit and window: set here they win over the tasks'. "
        "Scope `global` (a key any user's task may name) is for operators (staff users) "
        "only; 200 when the key existed.",
    ),
    "rate_limits_retrieve": ("Get a rate limit", _OWN),
    "rate_limits_partial_update": (
        "Change a rate limit",
        "`limit`, `per` or both; the next claim applies them to every task of the key.",
    ),
    "channels_list": ("List your notification channels", _PAGED),
    "channels_create": (
        "Create a notification channel",
        "An email, webhook or Slack channel. Secrets and tokens are write-only: never "
        "returned, except a webhook secret the service generated, shown once in this answer.",
    ),
    "channels_retrieve": ("Get a channel", _OWN),
    "channels_partial_update": ("Change a channel", "Only the fields sent change."),
    "channels_destroy": (
        "Delete a channel",
        "Its delivery log goes with it; tasks naming it stop notifying it.",
    ),
    "notifications_list": (
        "List notification deliveries",
        "The delivery log, newest first; filter by `status`, `event`, `task`, `channel` or "
        "`run`. " + _PAGED,
    ),
    "notifications_retrieve": ("Get a notification delivery", _OWN),
    "health_retrieve": (
        "Component health",
        "200 when every critical component is healthy (warnings allowed), else 503; one entry "
        "per component, with how many processes of each role are alive. No token needed.",
    ),
    "health_live_retrieve": (
        "Liveness probe",
        "The process answers; nothing else is checked. No token needed.",
    ),
    "seed_task_create": (
        "Create a task (seed route)",
        "As `POST /api/v1/tasks`, also taking `dedup_id`, a cron string or nothing as "
        "`schedule`, `delay` seconds and the executable as multipart part `file`.",
    ),
    "seed_task_update": (
        "Change a task named in the body (seed route)",
        "As `PATCH /api/v1/tasks/{id}`, with the task's id as `task_id` in the body.",
    ),
    "seed_task_retrieve": ("Get a task by `?id=` (seed route)", "As `GET /api/v1/tasks/{id}`."),
    "seed_task_destroy": (
        "Cancel a task by `?id=` (seed route)",
        "As `DELETE /api/v1/tasks/{id}` without `force`.",
    ),
    "seed_task_by_id_retrieve": ("Get a task (seed route)", "As `GET /api/v1/tasks/{id}`."),
    "seed_task_by_id_update": (
        "Change a task (seed route)",
        'As `PATCH /api/v1/tasks/{id}`, answering 204; `{"cancel_next": true}` skips the '
        "next occurrence.",
    ),
    "seed_task_by_id_destroy": (
        "Cancel a task (seed route)",
        "As `DELETE /api/v1/tasks/{id}` without `force`; 204.",
    ),
    "seed_task_status_update": (
        "Enable or disable a task (seed route)",
        '`{"task_id", "status": "enable"}` resumes the task, `"disable"` pauses it.',
    ),
    "seed_tasks_list": ("List your tasks (seed route)", "As `GET /api/v1/tasks`."),
    "teams_list": ("List your teams", "Each with your `role` in it. " + _PAGED),
    "teams_create": (
        "Create a team",
        "You become its first admin. A taken `slug` is a 400 on `slug`.",
    ),
    "teams_retrieve": ("Get a team", _TEAM),
    "teams_members_list": ("List a team's members", "People and service accounts. " + _TEAM),
    "teams_members_create": (
        "Add a member or change their role",
        "Admins only (403 otherwise). 201 when added, 200 when the role changed.",
    ),
    "teams_members_partial_update": (
        "Change a member's role",
        "Admins only; the last admin keeps the role (400 on `role`).",
    ),
    "teams_members_destroy": (
        "Remove a member",
        "Admins only; effective at the member's next request. The last admin stays (400).",
    ),
    "teams_service_accounts_list": ("List a team's service accounts", "Admins only."),
    "teams_service_accounts_create": (
        "Create a service account",
        "A machine identity of the team with role `viewer` or `editor`; admins only.",
    ),
    "teams_service_accounts_tokens_list": (
        "List a service account's tokens",
        "Names, scopes, expiry, last use and revocation; never the token's text.",
    ),
    "teams_service_accounts_tokens_create": (
        "Create a token",
        "Scoped (`read`, `write`, `run`, `tasksets:apply`) and expiring; its text is in "
        "`token`, shown this once (the service keeps its SHA-256 only).",
    ),
    "teams_service_accounts_tokens_destroy": (
        "Revoke a token",
        "Refused from the next request on (401 `token_revoked`); answers the token.",
    ),
}

# A task as an answer shows it (the http_cron example after its creation), for the docs' samples.
TASK_EXAMPLE: Schema = {
    "id": "019ad5f2-7c1e-7a3b-9f00-2b8c4d6e8f10",
    "owner": "admin",
    "name": "nightly report",
    "dedup_key": None,
    "kind": "http",
    "payload": HTTP_PAYLOAD["example"],
    "executable": None,
    "schedule": {
        **SCHEDULES["cron"]["example"],
        "start_at": None,
        "end_at": None,
        "max_runs": None,
        "jitter": 0,
        "misfire": "run_once",
        "misfire_grace": 60,
        "overlap": "allow",
        "anchor": "2026-12-01T18:00:00Z",
    },
    "priority": 9,
    "max_attempts": 3,
    "retry_backoff": {"base": 10.0, "cap": 300.0},
    "timeout": 60.0,
    "notify": [],
    "resources": {},
    "on_zombie": "notify",
    "status": "active",
    "last_run": None,
    "next_run_at": "2026-12-02T08:00:00Z",
    "next_runs": [
        "2026-12-02T08:00:00Z",
        "2026-12-03T08:00:00Z",
        "2026-12-04T08:00:00Z",
        "2026-12-07T08:00:00Z",
        "2026-12-08T08:00:00Z",
    ],
    "next_runs_detail": [
        {"scheduled_at": "2026-12-02T08:00:00Z", "run_id": None},
        {"scheduled_at": "2026-12-03T08:00:00Z", "run_id": None},
        {"scheduled_at": "2026-12-04T08:00:00Z", "run_id": None},
        {"scheduled_at": "2026-12-07T08:00:00Z", "run_id": None},
        {"scheduled_at": "2026-12-08T08:00:00Z", "run_id": None},
    ],
    "runs": [],
    "created_at": "2026-12-01T18:00:00Z",
    "updated_at": "2026-12-01T18:00:00Z",
}
# operation id -> example answers (201 and 200 alike).
RESPONSE_EXAMPLES: dict[str, dict[str, tuple[str, Schema]]] = {
    op: {"task": ("A recurring http task", TASK_EXAMPLE)}
    for op in ("tasks_create", "tasks_retrieve", "tasks_partial_update", "tasks_update")
}
