"""The audit page's search and filters, built to stay fast on a log of millions of entries: the
search finds an object's id, an actor's name or the start of an object's name (each an index's),
not any substring; the date range filter keeps entries from `at__gte` to before `at__lt`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client
from django.urls import reverse

from tasks.audit_log import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

LOG = reverse("admin:tasks_auditentry_changelist")


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def shown(staff: Client, **params: str) -> set[str]:
    response = staff.get(LOG, params)
    assert response.status_code == 200
    return {entry.object_id for entry in response.context["cl"].result_list}


def entry(object_id: str, name: str, actor: str = "", at: str = "2026-03-01T12:00:00Z"):
    return AuditEntry.objects.create(
        action="update",
        object_type="task",
        object_id=object_id,
        object_name=name,
        actor_name=actor,
        at=datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(UTC),
    )


def test_search_finds_an_id_an_actor_or_the_start_of_a_name(staff) -> None:
    entry("0193a0b2-1", "Nightly export", actor="carol")
    entry("0193a0b2-2", "Weekly report", actor="dave")
    entry("0193a0b2-3", "export of invoices")

    assert shown(staff, q="0193a0b2-2") == {"0193a0b2-2"}
    assert shown(staff, q="carol") == {"0193a0b2-1"}
    assert shown(staff, q="nightly") == {"0193a0b2-1"}  # any case
    assert shown(staff, q="export") == {"0193a0b2-3"}  # the start of a name, not a substring


def test_the_date_range_keeps_from_inclusive_to_before_exclusive(staff) -> None:
    entry("a", "a", at="2026-02-28T23:59:59Z")
    entry("b", "b", at="2026-03-01T00:00:00Z")
    entry("c", "c", at="2026-03-02T00:00:00Z")

    assert shown(staff, at__gte="2026-03-01T00:00:00Z", at__lt="2026-03-02T00:00:00Z") == {"b"}


def test_the_filters_offer_the_vocabulary_and_apply_it(staff) -> None:
    entry("a", "a")
    AuditEntry.objects.create(action="delete", object_type="calendar", object_id="d")

    page = staff.get(LOG).content.decode()
    assert "?action__exact=pause" in page  # offered though no entry has it: a fixed list
    assert shown(staff, action__exact="delete") == {"d"}
    assert shown(staff, object_type__exact="task") == {"a"}


def test_a_count_that_stopped_at_its_cap_reads_as_at_least(staff, monkeypatch) -> None:
    for n in range(3):
        entry(f"e{n}", f"entry {n}")
    monkeypatch.setattr("tasks.admin.lists.COUNT_CAP", 2)

    capped = staff.get(LOG, {"action__exact": "update"}).content.decode()
    exact = staff.get(LOG, {"action__exact": "update", "q": "e1"}).content.decode()

    assert "2+ audit entries" in capped
    assert "1 audit entry" in exact
