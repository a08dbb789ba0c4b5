"""A calendar app's view of the feeds, through a real gunicorn: the task's `calendar_url` is
fetched as an app fetches it (no Authorization header), parsed by `icalendar`, and lists the
task's next runs; a rotation shuts the old URL; the token stays out of the access log."""

from __future__ import annotations

import subprocess
import sys

import requests
from icalendar import Calendar

from tests.conftest import ROOT, free_port, process_env
from tests.system.api_process import start_gunicorn

PASSWORD = "calendar-feed-test-password"


def test_a_calendar_app_subscribes_through_gunicorn(processes, tmp_path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = process_env(
        ALLOWED_HOSTS="127.0.0.1",
        SCHEDULER_PUBLIC_URL=base,
        DJANGO_SUPERUSER_USERNAME="ops",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    subprocess.run(
        [sys.executable, "manage.py", "ensureadmin"], env=env, cwd=ROOT, check=True, timeout=120
    )
    log = tmp_path / "gunicorn.log"
    start_gunicorn(processes, env, log, port)
    access = requests.post(
        f"{base}/api/v1/auth/token", json={"username": "ops", "password": PASSWORD}, timeout=10
    ).json()["access"]
    jwt = {"Authorization": f"Bearer {access}"}
    created = requests.post(
        f"{base}/api/v1/tasks",
        headers=jwt,
        timeout=10,
        json={
            "name": "hourly report",
            "kind": "handler",
            "payload": {"name": "noop"},
            "schedule": {"type": "cron", "expression": "0 * * * *"},
        },
    )
    assert created.status_code == 201, created.text
    task = created.json()
    assert task["calendar_url"].startswith(f"{base}/api/v1/tasks/{task['id']}/calendar.ics?")

    feed = requests.get(task["calendar_url"], headers={"Accept": "text/calendar"}, timeout=10)
    assert feed.status_code == 200, feed.text[:300]
    assert feed.headers["Content-Type"] == "text/calendar; charset=utf-8"
    found = Calendar.from_ical(feed.content).walk("VEVENT")
    shown = [e["DTSTART"].dt.strftime("%Y-%m-%dT%H:%M:%SZ") for e in found]
    assert shown[:5] == task["next_runs"]
    assert {str(e["SUMMARY"]) for e in found} == {"hourly report"}

    user_feed = requests.get(f"{base}/api/v1/calendar-feed", headers=jwt, timeout=10).json()
    assert requests.get(user_feed["url"], timeout=10).status_code == 200
    rotated = requests.post(f"{base}/api/v1/calendar-feed/rotate", headers=jwt, timeout=10)
    assert rotated.status_code == 200
    assert requests.get(task["calendar_url"], timeout=10).status_code == 404
    assert requests.get(user_feed["url"], timeout=10).status_code == 404
    assert requests.get(rotated.json()["url"], timeout=10).status_code == 200

    token = task["calendar_url"].split("token=")[1]
    processes.stop_all()
    assert "calendar.ics" in log.read_text()  # the access log has the requests,
    assert token not in log.read_text()  # not the credential in their URLs
