"""What a reader of ReDoc sees of creating a task: the payload as one of its kinds (tabs
named after the components), the schedule as a choice of type (the discriminator's selector,
each type with its own fields), and the examples as request and response samples."""

from __future__ import annotations

OPERATION = "[data-section-id='tag/tasks/operation/tasks_create']"


def test_redoc_shows_the_kinds_of_payload_and_the_types_of_schedule(site: str, page) -> None:
    page.goto(f"{site}/api/redoc/#tag/tasks/operation/tasks_create")
    create = page.locator(OPERATION)
    create.wait_for(timeout=30_000)

    create.get_by_role("button", name="payload").first.click()
    for kind in ("HandlerPayload", "HttpPayload", "ExecutablePayload"):
        assert create.get_by_role("button", name=kind).first.is_visible(), kind
    create.get_by_role("button", name="HttpPayload").first.click()
    assert create.get_by_text("expect_status", exact=True).first.is_visible()

    create.get_by_role("button", name="schedule").first.click()
    assert "object or null" in create.inner_text()
    selector = create.locator("select, [role='listbox'], [role='combobox']").first
    selector.wait_for()
    # The discriminator's selector lists every schedule type.
    options = selector.inner_text()
    assert all(kind in options for kind in ("once", "interval", "weekly", "cron")), options

    # The request examples by their summaries, the first one shown; the answer's example too.
    shown = page.locator(f"{OPERATION} ~ div, {OPERATION} div").all_inner_texts()
    text = "\n".join(shown)
    assert "A handler in 5 seconds" in text and '"hello"' in text
    assert "nightly report" in text
