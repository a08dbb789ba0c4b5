"""Fixtures of the browser tests: the site as deployed (collected static files, gunicorn) and
headless Chromium driven by Playwright.

Chromium is Debian's (`apt-get install chromium`, which .ci/run does); without it the tests
skip, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, process_env
from tests.gunicorn_server import gunicorn  # noqa: F401  (the fixture, for these tests too)

CHROMIUM = os.environ.get("SCHEDULER_TEST_CHROMIUM") or shutil.which("chromium") or ""


@pytest.fixture(scope="session")
def static_root(tmp_path_factory) -> Path:
    """`collectstatic` into a temporary STATIC_ROOT, as `make run` and the Dockerfile do."""
    root = tmp_path_factory.mktemp("static")
    # collectstatic needs settings but no database (as in the Dockerfile's build step).
    env = process_env(STATIC_ROOT=str(root), DATABASE_URL="postgres://unused@127.0.0.1:1/unused")
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "collectstatic", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    return root


@pytest.fixture
def site(gunicorn, static_root) -> str:  # noqa: F811
    """The API, docs and admin served by gunicorn with the collected static files."""
    return gunicorn(workers=2, STATIC_ROOT=str(static_root))


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    if not CHROMIUM:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API keeps an event loop running in this thread; Django then refuses ORM
    # calls as "async unsafe", though they run synchronously here. Allowed while the browser lives.
    allowed = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            yield browser
            browser.close()
    finally:
        if allowed is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = allowed


@pytest.fixture
def page(chromium) -> Iterator[object]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


class Traffic:
    """What a page asked for: every request, and those the browser refused to send."""

    def __init__(self, page) -> None:
        self.requests: list[str] = []
        self.blocked: dict[str, str] = {}
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("requestfailed", self._failed)

    def _failed(self, request) -> None:
        self.blocked[request.url] = request.failure or ""

    def left_the_host(self, site: str) -> list[str]:
        """Requests to anywhere but `site` that were not stopped by the page's CSP first."""
        return [
            url
            for url in self.requests
            if not url.startswith((site, f"blob:{site}", "data:"))
            and self.blocked.get(url) not in ("csp", "net::ERR_BLOCKED_BY_CSP")
        ]
