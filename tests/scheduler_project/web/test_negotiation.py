"""Content negotiation remembered per (renderers, format, Accept header): each request still
gets the renderer its own header asks for, and a refusal stays a refusal."""

from __future__ import annotations

import pytest

from scheduler_project.web import negotiation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh() -> None:
    negotiation._chosen.clear()


def test_each_request_gets_the_renderer_its_header_asks_for(api) -> None:
    for _ in range(2):  # the second round is answered from what the first negotiated
        as_json = api.get("/api/v1/tasks", HTTP_ACCEPT="application/json")
        as_html = api.get("/api/v1/tasks", HTTP_ACCEPT="text/html")
        by_default = api.get("/api/v1/tasks")
        as_api = api.get("/api/v1/tasks?format=api", HTTP_ACCEPT="text/html")
        as_json_by_format = api.get("/api/v1/tasks?format=json")
        assert as_json["Content-Type"] == "application/json"
        assert as_html["Content-Type"].startswith("text/html")
        assert by_default["Content-Type"] == "application/json"
        assert as_api["Content-Type"].startswith("text/html")
        assert as_json_by_format["Content-Type"] == "application/json"
    assert len(negotiation._chosen) == 5


def test_parameters_of_the_accepted_type_are_kept(api) -> None:
    for _ in range(2):
        indented = api.get("/api/v1/tasks", HTTP_ACCEPT="application/json; indent=2")
        compact = api.get("/api/v1/tasks", HTTP_ACCEPT="application/json")
        assert indented.content.startswith(b'{\n  "count"'), indented.content[:20]
        assert compact.content.startswith(b'{"count"'), compact.content[:20]


def test_a_refusal_is_not_remembered(api) -> None:
    for _ in range(2):
        assert api.get("/api/v1/tasks", HTTP_ACCEPT="image/png").status_code == 406
        assert api.get("/api/v1/tasks?format=xml").status_code == 404
        assert api.get("/api/v1/tasks?format=json", HTTP_ACCEPT="text/html").status_code == 406
    assert negotiation._chosen == {}
