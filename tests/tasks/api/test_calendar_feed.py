"""The calendar feeds against the real views: parsed by `icalendar` itself, they list what the
preview and the task's `next_runs` list; a feed token opens its owner's feeds only; a rotation
shuts the old URLs; a wrong token tells nothing about which tasks exist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from icalendar import Calendar, vDuration
from rest_framework.test import APIClient

from tasks.api.calendar_feed import EVENTS_PER_TASK, FEED_DAYS
from tasks.api.ical import calendar_ics
from tasks.ids import idempotency_key

pytestmark = pytest.mark.django_db

EVERY_5_MINUTES = {"type": "cron", "expression": "*/5 * * * *"}
DAILY = {"type": "daily", "at": "09:00", "timezone": "Europe/Berlin"}


@pytest.fixture(autouse=True)
def _public_url(settings) -> None:
    settings.SCHEDULER_PUBLIC_URL = "https://scheduler.example"


def fetch(client: APIClient, url: str, **headers: str):
    """GET an absolute feed URL through the test client (its path and query)."""
    assert url.startswith("https://scheduler.example/api/v1/"), url
    parts = urlsplit(url)
    return client.get(f"{parts.path}?{parts.query}", **headers)


def events(response) -> list:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    calendar = Calendar.from_ical(response.content)
    assert calendar["VERSION"] == "2.0"
    return calendar.walk("VEVENT")


def starts(found: list) -> list[str]:
    return [e["DTSTART"].dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for e in found]


def preview(api: APIClient, schedule: dict, count: int) -> list[str]:
    response = api.post(
        "/api/v1/schedules/preview", {"schedule": schedule, "count": count}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["next_runs"]


def test_a_task_feed_lists_the_next_fire_times_the_preview_and_next_runs_show(
    api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    task = create(name="every five", schedule=EVERY_5_MINUTES)
    found = events(fetch(anon, task["calendar_url"]))  # no JWT: the token is the credential
    assert len(found) == EVENTS_PER_TASK  # 30 days hold more; the cap holds
    assert starts(found)[:20] == preview(api, EVERY_5_MINUTES, 20)
    assert starts(found)[:5] == task["next_runs"]
    assert {str(e["SUMMARY"]) for e in found} == {"every five"}
    # The UID is the run's idempotency key: the same event, planned or not, on every fetch.
    first = found[0]["DTSTART"].dt
    assert str(found[0]["UID"]) == f"{idempotency_key(task['id'], first)}@scheduler"
    again = events(fetch(anon, task["calendar_url"]))
    assert [str(e["UID"]) for e in again] == [str(e["UID"]) for e in found]


def test_the_horizon_is_thirty_days_and_excluded_days_are_not_listed(
    api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    berlin = timezone.now().astimezone(ZoneInfo("Europe/Berlin")).date()
    day_off = (berlin + timedelta(days=3)).isoformat()
    response = api.post("/api/v1/calendars", {"name": "off", "dates": [day_off]}, format="json")
    assert response.status_code == 201, response.content
    schedule = {**DAILY, "exclude": [response.json()["id"]]}
    task = create(name="nightly", schedule=schedule)

    listed = starts(events(fetch(anon, task["calendar_url"])))
    assert FEED_DAYS - 2 <= len(listed) <= FEED_DAYS  # one a day, less the day off
    assert listed == preview(api, schedule, 40)[: len(listed)]
    assert not any(at.startswith(day_off) for at in listed)  # 09:00 Berlin is that day in UTC
    horizon = datetime.now(UTC) + timedelta(days=FEED_DAYS)
    assert listed[-1] <= horizon.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_paused_and_cancelled_tasks_list_nothing(
    api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    task = create(schedule=EVERY_5_MINUTES)
    assert api.post(f"/api/v1/tasks/{task['id']}/pause").status_code == 200
    assert events(fetch(anon, task["calendar_url"])) == []
    assert api.post(f"/api/v1/tasks/{task['id']}/resume").status_code == 200
    assert len(events(fetch(anon, task["calendar_url"]))) == EVENTS_PER_TASK
    assert api.delete(f"/api/v1/tasks/{task['id']}").status_code == 204
    assert events(fetch(anon, task["calendar_url"])) == []


def test_the_user_feed_lists_only_the_owners_active_tasks(
    api: APIClient, other_api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    create(name="mine, daily", schedule=DAILY)
    soon = (timezone.now() + timedelta(days=2)).isoformat()
    create(name="mine, once soon", schedule={"type": "once", "run_at": soon})
    create(name="mine, once later", schedule={"type": "once", "run_at": "2099-01-01T00:00:00Z"})
    paused = create(name="mine, paused", schedule=DAILY)
    api.post(f"/api/v1/tasks/{paused['id']}/pause")
    theirs = other_api.post(
        "/api/v1/tasks",
        {"name": "theirs", "kind": "handler", "payload": {"name": "noop"}, "schedule": DAILY},
        format="json",
    )
    assert theirs.status_code == 201

    url = api.get("/api/v1/calendar-feed").json()["url"]
    assert url.startswith("https://scheduler.example/api/v1/calendar.ics?token=")
    found = events(fetch(anon, url))
    # The later one-time task is past the horizon; the paused one and theirs are not listed.
    assert {str(e["SUMMARY"]) for e in found} == {"mine, daily", "mine, once soon"}
    assert starts(found) == sorted(starts(found))
    theirs_url = other_api.get("/api/v1/calendar-feed").json()["url"]
    assert {str(e["SUMMARY"]) for e in events(fetch(anon, theirs_url))} == {"theirs"}


def test_the_feed_url_is_the_same_until_rotated_and_rotation_shuts_the_old_urls(
    api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    task = create(schedule=DAILY)  # its answer made the token
    old = api.get("/api/v1/calendar-feed").json()["url"]
    assert api.get("/api/v1/calendar-feed").json()["url"] == old
    assert old.split("token=")[1] == task["calendar_url"].split("token=")[1]

    rotated = api.post("/api/v1/calendar-feed/rotate")
    assert rotated.status_code == 200
    new = rotated.json()["url"]
    assert new != old and api.get("/api/v1/calendar-feed").json()["url"] == new
    assert fetch(anon, old).status_code == 404
    assert fetch(anon, task["calendar_url"]).status_code == 404
    shown = api.get(f"/api/v1/tasks/{task['id']}").json()["calendar_url"]
    assert shown.split("token=")[1] == new.split("token=")[1]
    assert len(events(fetch(anon, shown))) >= FEED_DAYS - 1
    assert len(events(fetch(anon, new))) >= FEED_DAYS - 1


def test_the_task_list_carries_each_tasks_feed(
    api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    ids = {create(name=f"t{i}", schedule=DAILY)["id"] for i in range(3)}
    page = api.get("/api/v1/tasks").json()["results"]
    urls = {t["id"]: t["calendar_url"] for t in page}
    assert set(urls) == ids
    for task_id, url in urls.items():
        assert f"/api/v1/tasks/{task_id}/calendar.ics?token=" in url
        assert {str(e["SUMMARY"]) for e in events(fetch(anon, url))} == {
            t["name"] for t in page if t["id"] == task_id
        }


def test_a_wrong_token_answers_404_as_an_unknown_task_does(
    api: APIClient, other_api: APIClient, anon: APIClient, create: Callable[..., dict]
) -> None:
    task = create(schedule=DAILY)
    token = task["calendar_url"].split("token=")[1]
    other_token = other_api.get("/api/v1/calendar-feed").json()["url"].split("token=")[1]
    path = f"/api/v1/tasks/{task['id']}/calendar.ics"
    unknown = "/api/v1/tasks/01900000-0000-7000-8000-000000000000/calendar.ics"
    refused = [
        anon.get(path),  # no token
        anon.get(f"{path}?token="),
        anon.get(f"{path}?token={token[:-1]}x"),  # wrong
        anon.get(f"{path}?token={'a' * 500}"),  # longer than any token
        anon.get(f"{path}?token=%00"),  # PostgreSQL refuses NUL: not a 500
        anon.get(f"{path}?token={other_token}"),  # another user's token: not their task
        anon.get(f"{unknown}?token={token}"),  # the right token, no such task
        anon.get("/api/v1/calendar.ics?token=nope"),
        anon.get("/api/v1/calendar.ics"),
        # A calendar app asks for iCalendar; the refusal is the API's JSON all the same.
        anon.get(f"{path}?token=nope", HTTP_ACCEPT="text/calendar"),
    ]
    assert [r.status_code for r in refused] == [404] * len(refused)
    bodies = {r.content for r in refused[:-3]}
    assert len(bodies) == 1  # one answer: nothing tells a task that exists from one that does not
    for response in refused:
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "not_found"
    # A JWT opens no feed: the feeds read the token only.
    assert api.get(path).status_code == 404


def test_the_feed_url_routes_need_a_jwt(anon: APIClient) -> None:
    assert anon.get("/api/v1/calendar-feed").status_code == 401
    assert anon.post("/api/v1/calendar-feed/rotate").status_code == 401


def test_a_calendar_app_asking_for_icalendar_gets_it(
    anon: APIClient, create: Callable[..., dict]
) -> None:
    task = create(schedule=DAILY)
    for accept in ("text/calendar", "*/*", "text/calendar, application/json;q=0.5"):
        assert events(fetch(anon, task["calendar_url"], HTTP_ACCEPT=accept))
    parts = urlsplit(task["calendar_url"])
    assert anon.head(f"{parts.path}?{parts.query}").status_code == 200


def test_a_list_page_reads_the_token_in_its_own_statement(
    api: APIClient, create: Callable[..., dict]
) -> None:
    for i in range(3):
        create(name=f"t{i}", schedule=DAILY)
    with CaptureQueriesContext(connection) as queries:
        page = api.get("/api/v1/tasks").json()["results"]
    assert len({t["calendar_url"].split("token=")[1] for t in page}) == 1  # one token per user
    reading = [q["sql"] for q in queries.captured_queries if "tasks_calendarfeed" in q["sql"]]
    assert len(reading) == 1 and "json_build_object" in reading[0]  # the page's statement


# RFC 5545 3.3.6 dur-value: PnW, or PnD with an optional time part, or a time part alone.
DURATION = re.compile(r"[+-]?P(\d+W|(\d+D)?(T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S))?)")
TTLS = ("REFRESH-INTERVAL", "X-PUBLISHED-TTL")


def test_the_refresh_properties_are_icalendar_durations() -> None:
    text = calendar_ics("feed", [], now=timezone.now()).decode()
    values = {
        line.split(":", 1)[0].split(";")[0]: line.split(":", 1)[1] for line in text.splitlines()
    }
    for name in TTLS:
        assert DURATION.fullmatch(values[name]) and values[name] != "P", (name, values[name])
        assert vDuration.from_ical(values[name]) == timedelta(hours=1)


@pytest.fixture(scope="session")
def ical_js(tmp_path_factory) -> Path:
    """npm's ical.js (what calendar apps on the web parse feeds with), installed for the run."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed")
    where = tmp_path_factory.mktemp("icaljs")
    install = ["npm", "install", "--prefix", str(where), "--no-audit", "--no-fund", ICAL_JS]
    if subprocess.run(install, capture_output=True, timeout=300).returncode != 0:
        pytest.skip(f"npm could not install {ICAL_JS}")
    return where


ICAL_JS = "ical.js@2.2.1"
READ_TTLS = """
import ICAL from "ical.js";
import fs from "fs";
const calendar = new ICAL.Component(ICAL.parse(fs.readFileSync(0, "utf8")));
const seconds = {};
for (const name of %s) {
  const value = String(calendar.getFirstPropertyValue(name.toLowerCase()));
  seconds[name] = ICAL.Duration.fromString(value).toSeconds();
}
console.log(JSON.stringify(seconds));
"""


def test_ical_js_reads_the_refresh_properties_as_durations(ical_js: Path) -> None:
    script = ical_js / "ttl.mjs"
    script.write_text(READ_TTLS % json.dumps(list(TTLS)))
    feed = calendar_ics("feed", [], now=timezone.now())
    done = subprocess.run(
        ["node", str(script)], input=feed, capture_output=True, timeout=60, cwd=ical_js
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == dict.fromkeys(TTLS, 3600)
