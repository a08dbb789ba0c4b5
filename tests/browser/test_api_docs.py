"""/api/docs/ (Swagger UI) and /api/redoc/ (ReDoc) render every operation from our own static
files in headless Chromium, and no request leaves the host: every request goes to
the server itself, except what the page's Content-Security-Policy stops before it is sent."""

from __future__ import annotations

import requests

from tests.browser.conftest import Traffic


def operations(site: str) -> int:
    schema = requests.get(f"{site}/api/schema/?format=json", timeout=30).json()
    return sum(
        1
        for methods in schema["paths"].values()
        for method in methods
        if method in {"get", "post", "put", "patch", "delete"}
    )


def test_swagger_ui_renders_every_operation_offline(site: str, page) -> None:
    expected = operations(site)
    traffic = Traffic(page)

    page.goto(f"{site}/api/docs/")
    # A locator, not a JavaScript predicate: the page's CSP forbids eval (as it should).
    page.locator(".opblock").nth(expected - 1).wait_for(timeout=30_000)

    assert page.locator(".opblock").count() == expected
    assert page.locator(".opblock-summary-path", has_text="/api/v1/tasks").count() >= 1
    assert traffic.requests and traffic.left_the_host(site) == [], traffic.requests
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in u for u in traffic.requests)


def test_redoc_renders_every_operation_offline(site: str, page) -> None:
    expected = operations(site)
    traffic = Traffic(page)

    page.goto(f"{site}/api/redoc/")
    selector = "[data-section-id^='operation/']"
    page.locator(selector).nth(expected - 1).wait_for(timeout=30_000)

    assert page.locator(selector).count() == expected
    # ReDoc's sidebar always asks for a logo from its CDN; the page's CSP stops it unsent.
    assert traffic.requests and traffic.left_the_host(site) == [], (
        traffic.requests,
        traffic.blocked,
    )
    assert any("/static/drf_spectacular_sidecar/redoc/" in u for u in traffic.requests)
