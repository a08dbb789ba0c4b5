"""People sign in with the company's identity in headless Chromium: the code flow with PKCE
through the test provider (its own process) into the admin, where each sees their own tasks and
an operator everyone's."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone

from accounts.models import Identity
from tasks.models import Run
from tests.factories import RunFactory, TaskFactory
from tests.oidc_server import oidc_provider, provider_key  # noqa: F401  (the fixtures)

pytestmark = pytest.mark.processes

PEOPLE = [
    {"username": "alice", "password": "alice-pass-1", "email": "alice@example.com"},
    {"username": "bob", "password": "bob-pass-1", "email": "bob@example.com"},
    {
        "username": "olga",
        "password": "olga-pass-1",
        "email": "olga@example.com",
        "groups": ["scheduler-operators"],
    },
]


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SCHEDULER_SCREENSHOT_DIR") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def oidc_site(gunicorn, static_root, oidc_provider):  # noqa: F811
    provider = oidc_provider(PEOPLE)
    site = gunicorn(workers=2, STATIC_ROOT=str(static_root), **provider.scheduler_env())
    return provider, site


def sign_in(page, site: str, username: str, password: str) -> list[str]:
    """Through the admin's login page and the provider's; returns the URLs the browser asked
    for on the way, so the test can look at the authorization request."""
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{site}/admin/")
    page.click("#oidc-sign-in")
    page.wait_for_selector("#provider-sign-in")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#provider-sign-in")
    page.wait_for_selector("#site-name")
    return asked


def test_people_sign_in_and_see_their_own_tasks(oidc_site, chromium, shots) -> None:
    provider, site = oidc_site
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)

    asked = sign_in(page, site, "alice", "alice-pass-1")
    page.screenshot(path=shots / "oidc-1-alice-index.png", full_page=True)

    authorize = next(url for url in asked if url.startswith(f"{provider.issuer}/authorize/"))
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
    assert query["response_type"] == ["code"]
    assert page.url.rstrip("/").endswith("/admin")
    alice = Identity.objects.get(user__username="alice").user  # made by the first sign-in
    assert not alice.is_staff

    # Bob signs in in his own browser context, then each owns a task.
    bob_context = chromium.new_context(viewport={"width": 1280, "height": 900})
    bob_page = bob_context.new_page()
    bob_page.set_default_timeout(30_000)
    sign_in(bob_page, site, "bob", "bob-pass-1")
    bob = Identity.objects.get(user__username="bob").user
    mine = TaskFactory(owner=alice, name="alice's report")
    theirs = TaskFactory(owner=bob, name="bob's backup")

    # The fire times show while the schedule is typed, before the task is saved.
    page.goto(f"{site}/admin/tasks/task/add/")
    page.select_option("#id_schedule_type", "cron")
    page.fill("#id_expression", "30 6 * * *")
    page.select_option("#id_timezone", "Europe/Berlin")
    page.wait_for_function(
        "[...document.querySelectorAll('.next-fire-times-preview li')]"
        ".filter(li => li.innerText.includes('06:30:00 Europe/Berlin')).length === 5"
    )
    page.screenshot(path=shots / "oidc-2-alice-task-add.png", full_page=True)
    page.fill("#id_expression", "30 6 * *")
    page.wait_for_selector(".next-fire-times-errors li")

    page.goto(f"{site}/admin/tasks/task/")
    page.screenshot(path=shots / "oidc-2-alice-tasks.png", full_page=True)
    names = page.locator("#result_list th.field-__str__").all_inner_texts()
    assert names == ["alice's report"]
    response = page.goto(f"{site}/admin/tasks/task/{theirs.pk}/change/")
    assert response is not None and response.status == 404

    # Her failed run's page: the Retry button schedules it again.
    failed = RunFactory(task=mine, status="failed", finished_at=timezone.now(), error="boom")
    page.goto(f"{site}/admin/tasks/run/{failed.pk}/change/")
    page.screenshot(path=shots / "oidc-3-alice-run.png", full_page=True)
    assert page.locator("#run-cancel").count() == 0
    page.click("#run-retry")
    page.wait_for_selector(".messagelist .success")
    failed.refresh_from_db()
    assert failed.status == "scheduled"
    assert page.locator("#run-cancel").count() == 1, "a scheduled run can be cancelled"

    # The run list shows the run finishing without a reload (the page's own state survives).
    page.goto(f"{site}/admin/tasks/run/?task__id__exact={mine.pk}")
    assert page.locator("#result_list td.field-status_badge").all_inner_texts() == ["scheduled"]
    page.evaluate("window.notReloaded = true")
    Run.objects.filter(pk=failed.pk).update(status="succeeded", finished_at=timezone.now())
    page.wait_for_function(
        "document.querySelector('#result_list td.field-status_badge').innerText === 'succeeded'",
        timeout=20_000,
    )
    assert page.evaluate("window.notReloaded") is True

    operator_context = chromium.new_context(viewport={"width": 1280, "height": 900})
    operator = operator_context.new_page()
    operator.set_default_timeout(30_000)
    sign_in(operator, site, "olga", "olga-pass-1")
    operator.goto(f"{site}/admin/tasks/task/")
    operator.screenshot(path=shots / "oidc-4-operator-tasks.png", full_page=True)
    names = operator.locator("#result_list th.field-__str__").all_inner_texts()
    assert sorted(names) == ["alice's report", "bob's backup"]
    assert operator.locator("#changelist-filter", has_text="By owner").count() == 1
    assert Identity.objects.get(user__username="olga").user.is_superuser

    for each in (context, bob_context, operator_context):
        each.close()
