"""Schemathesis against the served OpenAPI schema.

Every operation of `/api/schema/` gets FUZZ_EXAMPLES generated requests that fit the schema
(positive) and as many that do not (negative), sent in-process through the WSGI application with
a valid token. Half of the generated ids are swapped for ids of objects the user really owns
(fresh ones for each operation), so the actions, updates and deletes reach real rows rather than
only answering 404. Every response must be no server error and match the schema: status code,
content type, headers and body. The run is bounded (examples per operation, no shrinking) and
asserts its own volume: at least MIN_REQUESTS requests in all.

schemathesis's pytest plugin (`schema.parametrize()`) does not work with pytest 9, so the
operations are driven with its strategies and Hypothesis directly.

The stateful test walks the API as schemathesis's state machine does: OpenAPI links (LINKS, added to
the served schema here) take the ids a response returns (a task created, its run, a calendar, a
channel, a concurrency key, a rate limit, a task set's name, a notification listed, a workflow and
its run, a team's slug, member, service account and token), and the seeded objects' ids (SEEDED),
into the operations that take them, and the calendar feeds get the user's real token (and a
notification's detail the seeded notification: no operation makes one); every operation that takes
an id must be reached with a real one (answered other than 404) at least once: by the walk, or, for
the few a bounded walk misses by chance, directly.
"""

from __future__ import annotations

import ipaddress
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import schemathesis
from django.core.files.base import ContentFile
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Flaky, Unsatisfiable
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken
from schemathesis import checks as core_checks
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from notifications.models import Notification
from scheduler_project import outbound_http as http
from tasks import feed_tokens, schedules
from tasks.models import Calendar, ConcurrencyKey, RateKey, TaskSet
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.notifications.conftest import ChannelFactory

pytestmark = pytest.mark.fuzz

FUZZ_EXAMPLES = 40  # per operation and generation mode
MIN_REQUESTS = 2000
CHECKS = [
    core_checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.response_schema_conformance,
]
# /health answers 503 by design while no scheduler/worker/reviewer runs (as here): that is the
# probe's documented answer, not a server error. Its body must still match the schema.
PROBE_CHECKS = CHECKS[1:]
STATS: dict[str, Any] = {"requests": 0, "seconds": 0.0, "statuses": Counter(), "modes": set()}


@pytest.fixture
def fuzz_settings(settings, tmp_path, monkeypatch) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.SCHEDULER_WRITE_RATE = ""  # 429 is tested on its own; here it would only hide paths
    settings.SCHEDULER_OUTBOUND_ALLOW = []

    # No DNS from a test: host names resolve to a public address, IP literals to themselves.
    def resolve(host: str, port: int) -> list[Any]:
        try:
            return [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            return [ipaddress.ip_address("93.184.215.14")]

    monkeypatch.setattr(http, "_resolve", resolve)


def seed(user: Any, taskset: str = "") -> dict[str, list[str]]:
    """Objects of every kind the user owns, in the states the actions care about; the task set
    `taskset` (made again when gone), else one of a new name."""
    now = datetime.now(UTC)
    every_minute = schedules.normalize({"type": "interval", "every": 60}, now=now)
    tasks = [
        TaskFactory(owner=user),
        TaskFactory(owner=user, schedule=every_minute, schedule_type="interval"),
        TaskFactory(
            owner=user, kind="http", payload={"method": "GET", "url": "http://93.184.215.14/"}
        ),
        TaskFactory(
            owner=user,
            kind="executable",
            payload={"args": [], "env": {}},
            executable=ContentFile(b"#!/bin/sh\necho hi\n", name="job.sh"),
        ),
    ]
    runs = [
        RunFactory(task=tasks[0], scheduled_at=now + timedelta(hours=1)),
        RunFactory(task=tasks[1], status="failed", finished_at=now, attempt=1),
        RunFactory(task=tasks[2], status="succeeded", finished_at=now, attempt=1),
    ]
    channels = [
        ChannelFactory(owner=user, kind="email", config={"address": "ops@example.com"}),
        ChannelFactory(
            owner=user, config={"url": "http://93.184.215.14/hook"}, secrets={"secret": "s"}
        ),
    ]
    notification = Notification.objects.create(
        channel=channels[1],
        run=runs[1],
        task=tasks[1],
        attempt=1,
        event="failed",
        retry_until=now + timedelta(hours=1),
    )
    fresh = uuid.uuid4().hex[:8]  # a new set of names for each operation
    calendar = Calendar.objects.create(
        owner=user, name=f"holidays-{fresh}", dates=["2026-12-24"], timezone="Europe/Berlin"
    )
    key = ConcurrencyKey.objects.create(owner=user, name=f"db-{fresh}", max_running=2)
    rate = RateKey.objects.create(owner=user, name=f"api-{fresh}", rate_limit=5, per_seconds=60)
    named, made = TaskSet.objects.get_or_create(owner=user, name=taskset or f"nightly-{fresh}")
    if made:
        TaskFactory(owner=user, taskset=named, taskset_key="a")
    # A workflow and a running workflow run, made as a user makes them.
    client = APIClient()
    client.force_authenticate(user)
    noop = {"kind": "handler", "payload": {"name": "noop"}}
    steps = [{"id": "a", "task": noop}, {"id": "b", "after": ["a"], "task": noop}]
    workflow = client.post("/api/v1/workflows", {"name": f"wf-{fresh}", "steps": steps}, "json")
    assert workflow.status_code == 201, workflow.content
    workflow_run = client.post(f"/api/v1/workflows/{workflow.json()['id']}/run")
    assert workflow_run.status_code == 201, workflow_run.content
    # A team the user owns, with a member, a service account and its token.
    team = f"/api/v1/teams/team-{fresh}"
    made_team = client.post("/api/v1/teams", {"slug": f"team-{fresh}"}, "json")
    member = UserFactory()
    made_member = client.post(
        f"{team}/members", {"user": member.username, "role": "viewer"}, "json"
    )
    account = client.post(f"{team}/service-accounts", {"name": f"bot-{fresh}"}, "json")
    token = client.post(
        f"{team}/service-accounts/bot-{fresh}/tokens", {"name": "ci", "scopes": ["read"]}, "json"
    )
    for answer in (made_team, made_member, account, token):
        assert answer.status_code == 201, answer.content
    return {
        "task": [str(t.id) for t in tasks],
        "run": [str(r.id) for r in runs],
        "channel": [str(c.id) for c in channels],
        "notification": [str(notification.id)],
        "calendar": [str(calendar.id)],
        "concurrency_key": [str(key.id)],
        "rate_limit": [str(rate.id)],
        "taskset": [named.name],
        "workflow": [workflow.json()["id"]],
        "workflow_run": [workflow_run.json()["id"]],
        "team": [f"team-{fresh}"],
        "member": [member.username],
        "service_account": [f"bot-{fresh}"],
        "token": [str(token.json()["id"])],
        "feed": [feed_tokens.token_for(user.pk)],
    }


def kind_of(path: str) -> str:
    for prefix, kind in (
        ("/api/v1/runs/", "run"),
        ("/api/v1/channels/", "channel"),
        ("/api/v1/notifications/", "notification"),
        ("/api/v1/calendars/", "calendar"),
        ("/api/v1/concurrency-keys/", "concurrency_key"),
        ("/api/v1/rate-limits/", "rate_limit"),
        ("/api/v1/tasksets/", "taskset"),
        ("/api/v1/workflows/", "workflow"),
        ("/api/v1/workflow-runs/", "workflow_run"),
    ):
        if path.startswith(prefix):
            return kind
    return "task"


def use_real_ids(case: Any, ids: dict[str, list[str]]) -> None:
    """Replace about half of the generated ids (decided by the id itself) with owned ones."""
    kind = kind_of(case.operation.path)

    def swap(value: Any) -> Any:
        text = str(value)
        if sum(map(ord, text)) % 2:
            return value
        return ids[kind][sum(map(ord, text)) // 2 % len(ids[kind])]

    if case.path_parameters and "id" in case.path_parameters:
        case.path_parameters["id"] = swap(case.path_parameters["id"])
    if case.path_parameters and "name" in case.path_parameters:
        case.path_parameters["name"] = swap(case.path_parameters["name"])
    if case.query and "id" in case.query:
        case.query["id"] = swap(case.query["id"])
    if case.query and "token" in case.query and not sum(map(ord, str(case.query["token"]))) % 2:
        case.query["token"] = ids["feed"][0]
    if isinstance(case.body, dict) and "task_id" in case.body:
        case.body["task_id"] = swap(case.body["task_id"])


def fuzz_operation(operation: Any, mode: GenerationMode, token: str, ids: dict) -> None:
    checks = PROBE_CHECKS if operation.path == "/health" else CHECKS

    @given(case=operation.as_strategy(mode))
    @hypothesis_settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        use_real_ids(case, ids)
        start = time.monotonic()
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        STATS["seconds"] += time.monotonic() - start
        STATS["requests"] += 1
        STATS["statuses"][response.status_code] += 1
        try:
            case.validate_response(response, checks=checks)
        except (AssertionError, BaseExceptionGroup) as exc:
            curl = case.as_curl_command(headers={"Authorization": "Bearer ..."})
            raise AssertionError(f"{exc}\n{curl}\n{response.content[:300]!r}") from None

    try:
        run()
    except Unsatisfiable:
        pass  # nothing to negate: an operation without parameters or body


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_answers_as_documented(transactional_db, fuzz_settings, mode) -> None:
    user = UserFactory()
    token = str(RefreshToken.for_user(user).access_token)
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
    failures: dict[str, str] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        try:
            fuzz_operation(operation, mode, token, seed(user))
        except (Exception, BaseExceptionGroup) as exc:
            failures[operation.label] = str(exc)[:2000]
    STATS["modes"].add(mode)
    report = "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
    assert not failures, report


def test_enough_requests_were_made() -> None:
    """Runs after the fuzz test above in both modes (module order); `-s` shows the figures."""
    if len(STATS["modes"]) < 2:
        pytest.skip("the fuzz test above did not run in both modes")
    print(
        f"\nfuzz: {STATS['requests']} requests in {STATS['seconds']:.1f}s of request time; "
        f"statuses {dict(sorted(STATS['statuses'].items()))}"
    )
    assert STATS["requests"] >= MIN_REQUESTS


# The walks go on for STATEFUL_SECONDS, STATEFUL_SCENARIOS walks per round; an operation that
# takes an id and was not reached with a real one by then is called directly (call_directly).
STATEFUL_SECONDS = 30
DIRECT_EXAMPLES = 10  # generated cases per operation called directly, until one is not a 404
STATEFUL_SCENARIOS = 5
STATEFUL_STEPS = 20
# (producer path, method, status, {parameter: where in its answer}, consumers (path, method)).
ID = "$response.body#/id"  # of the object a producer made
FIRST = "$response.body#/results/0/id"  # of the first object a list shows
TASK_OPERATIONS = (
    [("/api/v1/tasks/{id}", method) for method in ("get", "put", "patch", "delete")]
    + [
        ("/api/v1/tasks/{id}/" + action, "post")
        for action in ("backfill", "pause", "resume", "run-now", "skip-next")
    ]
    + [("/api/v1/tasks/{id}/runs", "get"), ("/api/v1/tasks/{id}/calendar.ics", "get")]
)
SEED_ROUTE_OPERATIONS = [("/task/{id}", "get"), ("/task/{id}", "put"), ("/task/{id}", "delete")]
TASKSET_OPERATIONS = [
    (f"/api/v1/tasksets/{{name}}{tail}", method)
    for tail, method in (("", "get"), ("", "put"), ("", "delete"), ("/drift", "get"))
]
RUN_OPERATIONS = [
    ("/api/v1/runs/{id}", "get"),
    ("/api/v1/runs/{id}/cancel", "post"),
    ("/api/v1/runs/{id}/retry", "post"),
]
WORKFLOW_OPERATIONS = [
    *(("/api/v1/workflows/{id}", method) for method in ("get", "patch", "delete")),
    ("/api/v1/workflows/{id}/run", "post"),
    ("/api/v1/workflows/{id}/runs", "get"),
]
TEAM = "/api/v1/teams/{slug}"
ACCOUNT = TEAM + "/service-accounts/{name}"
TEAM_OPERATIONS = [
    (TEAM, "get"),
    *(
        (TEAM + tail, method)
        for tail in ("/members", "/service-accounts")
        for method in ("get", "post")
    ),
]
MEMBER_OPERATIONS = [(TEAM + "/members/{username}", method) for method in ("patch", "delete")]
ACCOUNT_OPERATIONS = [(ACCOUNT + "/tokens", method) for method in ("get", "post")]
TOKEN_OPERATIONS = [(ACCOUNT + "/tokens/{id}", "delete")]
# Where each path parameter of a team's routes takes its value from (seed()'s kinds).
TEAM_KINDS = {"slug": "team", "username": "member", "name": "service_account", "id": "token"}
WORKFLOW_RUN_OPERATIONS = [
    ("/api/v1/workflow-runs/{id}" + tail, method)
    for tail, method in (("", "get"), ("/cancel", "post"), ("/retry", "post"))
]


def member_operations(collection: str, methods: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(f"{collection}/{{id}}", method) for method in methods]


LINKS: list[tuple[str, str, str, dict[str, str], list[tuple[str, str]]]] = [
    ("/api/v1/tasks", "post", "201", {"id": ID}, TASK_OPERATIONS + SEED_ROUTE_OPERATIONS),
    ("/api/v1/tasks", "get", "200", {"id": FIRST}, TASK_OPERATIONS + SEED_ROUTE_OPERATIONS),
    ("/task", "post", "201", {"id": ID}, TASK_OPERATIONS + SEED_ROUTE_OPERATIONS),
    ("/task", "post", "201", {"query.id": ID}, [("/task", "get"), ("/task", "delete")]),
    ("/api/v1/tasks/{id}/run-now", "post", "201", {"id": ID}, RUN_OPERATIONS),
    ("/api/v1/runs", "get", "200", {"id": FIRST}, RUN_OPERATIONS),
    *(
        (collection, verb, status, {"id": where}, member_operations(collection, methods))
        for collection, methods in (
            ("/api/v1/calendars", ("get", "put", "patch", "delete")),
            ("/api/v1/channels", ("get", "patch", "delete")),
            ("/api/v1/concurrency-keys", ("get", "patch")),
            ("/api/v1/rate-limits", ("get", "patch")),
        )
        for verb, status, where in (("post", "201", ID), ("get", "200", FIRST))
    ),
    ("/api/v1/notifications", "get", "200", {"id": FIRST}, [("/api/v1/notifications/{id}", "get")]),
    ("/api/v1/workflows", "post", "201", {"id": ID}, WORKFLOW_OPERATIONS),
    ("/api/v1/workflows", "get", "200", {"id": FIRST}, WORKFLOW_OPERATIONS),
    ("/api/v1/workflows/{id}/run", "post", "201", {"id": ID}, WORKFLOW_RUN_OPERATIONS),
    ("/api/v1/workflows/{id}/runs", "get", "200", {"id": FIRST}, WORKFLOW_RUN_OPERATIONS),
    ("/api/v1/teams", "post", "201", {"slug": "$response.body#/slug"}, TEAM_OPERATIONS),
    (
        TEAM + "/members",
        "post",
        "201",
        {"slug": "$request.path.slug", "username": "$response.body#/user"},
        MEMBER_OPERATIONS,
    ),
    (
        TEAM + "/service-accounts",
        "post",
        "201",
        {"slug": "$request.path.slug", "name": "$response.body#/name"},
        ACCOUNT_OPERATIONS,
    ),
    (
        ACCOUNT + "/tokens",
        "post",
        "201",
        {"slug": "$request.path.slug", "name": "$request.path.name", "id": "$response.body#/id"},
        TOKEN_OPERATIONS,
    ),
    ("/api/v1/tasksets/{name}", "put", "200", {"name": "$response.body#/name"}, TASKSET_OPERATIONS),
    # The feeds take the user's token (injected: a link cannot read it out of the feed's URL).
    ("/api/v1/calendar-feed", "get", "200", {}, [("/api/v1/calendar.ics", "get")]),
]
# The seeded objects, by their ids as constants, from a root that always answers 200: a list
# filtered by generated parameters is often empty and generated bodies seldom create, so without
# these a bounded walk reaches some operations by chance alone. Not DELETE: the walk takes a
# producer's links in order and would delete them first (the links above reach DELETE).
SEEDED: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("task", "id", TASK_OPERATIONS + SEED_ROUTE_OPERATIONS),
    ("task", "query.id", [("/task", "get")]),
    ("run", "id", RUN_OPERATIONS),
    ("calendar", "id", member_operations("/api/v1/calendars", ("get", "put", "patch"))),
    ("channel", "id", member_operations("/api/v1/channels", ("get", "patch"))),
    ("concurrency_key", "id", member_operations("/api/v1/concurrency-keys", ("get", "patch"))),
    ("rate_limit", "id", member_operations("/api/v1/rate-limits", ("get", "patch"))),
    ("taskset", "name", TASKSET_OPERATIONS),
    ("workflow", "id", WORKFLOW_OPERATIONS),
    ("workflow_run", "id", WORKFLOW_RUN_OPERATIONS),
]
# The seeded team's routes, each given every path parameter it takes (TEAM_KINDS).
SEEDED_TEAM = TEAM_OPERATIONS + MEMBER_OPERATIONS + ACCOUNT_OPERATIONS
# Each round makes the seeded set again by its name, so it may be deleted: from a root of its own,
# or the walk would delete it before anything else reads it.
SEEDED_DELETE = (
    "/api/v1/tasksets/schema",
    "taskset",
    "name",
    [("/api/v1/tasksets/{name}", "delete")],
)


def with_links(raw: dict[str, Any], ids: dict[str, list[str]]) -> dict[str, Any]:
    """The served schema with LINKS added to the producers' responses, and SEEDED's links from
    GET /api/v1/calendar-feed to the seeded objects `ids` (and SEEDED_DELETE's)."""
    paths = raw["paths"]
    seeded = [
        (
            "/api/v1/calendar-feed",
            "get",
            "200",
            {parameter: ids[kind][0]},
            [(path, method) for path, method in consumers if method != "delete"],
        )
        for kind, parameter, consumers in SEEDED
    ]
    root, kind, parameter, consumers = SEEDED_DELETE
    seeded.append((root, "get", "200", {parameter: ids[kind][0]}, consumers))
    for target, verb in SEEDED_TEAM:
        values = {p: ids[TEAM_KINDS[p]][0] for p in TEAM_KINDS if f"{{{p}}}" in target}
        seeded.append(("/api/v1/calendar-feed", "get", "200", values, [(target, verb)]))
    for path, method, status, parameters, consumers in [*LINKS, *seeded]:
        response = paths[path][method]["responses"][status]
        links = response.setdefault("links", {})
        for target, verb in consumers:
            name = f"{verb}{target}".replace("/", "_").replace("{", "").replace("}", "")
            links[name] = {
                "operationId": paths[target][verb]["operationId"],
                "parameters": parameters,
            }
    return raw


def call_directly(
    operation: Any,
    ids: dict[str, list[str]],
    token: str,
    reached: dict[str, Counter],
    failures: dict[str, str],
) -> None:
    """Positive cases of `operation` given the seeded objects' ids, until one is answered other
    than 404; each answer counted in `reached` and checked against the schema."""
    checks = PROBE_CHECKS if operation.path == "/health" else CHECKS

    @given(case=operation.as_strategy(GenerationMode.POSITIVE))
    @hypothesis_settings(
        max_examples=DIRECT_EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        if any(status != 404 for status in reached.get(operation.label, {})):
            return
        kind = kind_of(operation.path)
        for parameter in ("id", "name"):
            if case.path_parameters and parameter in case.path_parameters:
                case.path_parameters[parameter] = ids[kind][0]
        if operation.path.startswith("/api/v1/teams/"):
            for parameter, team_kind in TEAM_KINDS.items():
                if case.path_parameters and parameter in case.path_parameters:
                    case.path_parameters[parameter] = ids[team_kind][0]
        if case.query and "id" in case.query:
            case.query["id"] = ids["task"][0]
        if case.query and "token" in case.query:
            case.query["token"] = ids["feed"][0]
        if isinstance(case.body, dict) and "task_id" in case.body:
            case.body["task_id"] = ids["task"][0]
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        reached.setdefault(operation.label, Counter())[response.status_code] += 1
        try:
            case.validate_response(response, checks=checks)
        except (AssertionError, BaseExceptionGroup) as exc:
            curl = case.as_curl_command(headers={"Authorization": "Bearer ..."})
            failures.setdefault(operation.label, f"{exc}\n{curl}\n{response.content[:300]!r}")

    run()


def test_stateful_fuzz_reaches_every_operation_with_real_ids(
    transactional_db, fuzz_settings
) -> None:
    user = UserFactory()
    token = str(RefreshToken.for_user(user).access_token)
    ids = seed(user)
    served = Client().get("/api/schema/?format=json")
    assert served.status_code == 200
    # Positive cases alone (the test above sends the negative ones), and only the links above:
    # the budget goes to chains that reach real rows.
    config = schemathesis.config.SchemathesisConfig.from_dict(
        {
            "generation": {"mode": "positive"},
            "phases": {"stateful": {"inference": {"algorithms": []}}},
        }
    )
    schema = schemathesis.openapi.from_dict(with_links(served.json(), ids), config=config)
    schema.app = get_wsgi_application()
    reached: dict[str, Counter] = {}
    failures: dict[str, str] = {}

    class Walk(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            if case.query and "token" in case.query:
                case.query["token"] = ids["feed"][0]
            if isinstance(case.body, dict) and "task_id" in case.body:
                case.body["task_id"] = ids["task"][0]
            if case.operation.path == "/api/v1/notifications/{id}":
                # No operation makes a notification (deliveries do): the round's seeded one, as
                # a list filtered by generated parameters is often empty.
                case.path_parameters["id"] = ids["notification"][0]

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"Authorization": f"Bearer {token}"}}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            label = case.operation.label
            reached.setdefault(label, Counter())[response.status_code] += 1
            checks = PROBE_CHECKS if case.operation.path == "/health" else CHECKS
            try:
                case.validate_response(response, checks=checks)
            except (AssertionError, BaseExceptionGroup) as exc:
                # Kept, not raised: a replay of a walk over live rows is not the same walk.
                curl = case.as_curl_command(headers={"Authorization": "Bearer ..."})
                failures.setdefault(label, f"{exc}\n{curl}\n{response.content[:300]!r}")

    # Short walks, many of them: Hypothesis's state machine expects the same draws to replay
    # the same way, which a walk over rows earlier walks changed cannot promise; when it notices
    # (Flaky), that round ends and the next starts afresh.
    takes_ids = {
        f"{verb.upper()} {target}" for *_, consumers in LINKS for target, verb in consumers
    }

    def unreached() -> dict[str, dict[int, int]]:
        return {
            label: dict(reached.get(label, {}))
            for label in sorted(takes_ids)
            if not any(status != 404 for status in reached.get(label, {}))
        }

    flaky = 0
    started = time.monotonic()
    while time.monotonic() - started < STATEFUL_SECONDS:
        # A walk deletes what it reaches: each round starts with the seeded objects there again.
        ids.update(seed(user, taskset=ids["taskset"][0]))
        try:
            Walk.run(
                settings=hypothesis_settings(
                    max_examples=STATEFUL_SCENARIOS,
                    stateful_step_count=STATEFUL_STEPS,
                    deadline=None,
                    database=None,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
            )
        except Flaky:
            flaky += 1
    walked = sum(sum(c.values()) for c in reached.values())
    # What the bounded walk missed (which, varies from run to run) is reached directly: a
    # generated case of the operation given the seeded object's id.
    missed = sorted(unreached())
    for label in missed:
        ids.update(seed(user, taskset=ids["taskset"][0]))
        method, path = label.split(" ", 1)
        call_directly(schema[path][method], ids, token, reached, failures)
    print(
        f"\nstateful fuzz: {walked} requests by the walk; {flaky} rounds cut short (Flaky); "
        f"{len(missed)} operations it missed reached directly {missed}; "
        f"{time.monotonic() - started:.0f} s"
    )
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
    assert not unreached(), f"never reached with a real id: {unreached()}"
