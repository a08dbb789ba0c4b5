"""The event vocabulary is tasks.events.EVENTS; every notifications part uses it,
and notifications plugs into the tasks app only by registering with it."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from rest_framework.exceptions import ValidationError

from notifications.api.serializers import ChannelInputSerializer
from notifications.delivery_thread import DeliveryThread
from notifications.messages import HEADLINES
from notifications.models import Channel, Notification
from tasks import events, outbox
from tasks.api.serializers import NotifySerializer
from tasks.worker import companions


def test_every_event_has_a_headline_and_nothing_else_does() -> None:
    assert list(HEADLINES) == list(events.EVENTS)


def test_models_and_serializers_accept_exactly_the_outbox_events() -> None:
    assert [value for value, _ in Notification._meta.get_field("event").choices] == list(
        events.EVENTS
    )
    channel_events = Channel._meta.get_field("all_tasks_events").base_field
    assert [value for value, _ in channel_events.choices] == list(events.EVENTS)
    assert list(NotifySerializer().fields["events"].child.choices) == list(events.EVENTS)
    all_tasks = ChannelInputSerializer().fields["all_tasks_events"].child
    assert list(all_tasks.choices) == list(events.EVENTS)


@pytest.mark.django_db
def test_the_databases_check_constraint_lists_every_event() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'notification_event_valid'"
        )
        [definition] = cursor.fetchone()
    for event in events.EVENTS:
        assert f"'{event}'" in definition


def test_enqueue_refuses_a_word_outside_the_vocabulary() -> None:
    run, task = uuid.uuid4(), uuid.uuid4()
    with pytest.raises(ValueError, match="timed_out"):
        outbox.enqueue(None, events=[(run, task, 1, "succeeded"), (run, task, 1, "timed_out")])


def test_a_tasks_notify_list_is_checked_by_the_notifications_app() -> None:
    with pytest.raises(ValidationError) as refused:
        outbox.validate_notify([{"channel": "not-an-id", "events": ["failed"]}], owner=None)
    assert refused.value.detail == {"0": {"channel": ["No channel with this id among yours."]}}
    channel = str(uuid.uuid4())
    entries = [{"channel": channel.upper(), "events": ["failed", "failed", "stuck"]}]
    assert outbox.validate_notify(entries, owner=None) == [
        {"channel": channel, "events": ["failed", "stuck"]}
    ]


@pytest.mark.django_db(transaction=True)
def test_the_worker_starts_the_delivery_thread_notifications_registered(settings) -> None:
    settings.NOTIFICATIONS_DELIVER_IN_WORKER = False
    assert companions.start_all() == []

    settings.NOTIFICATIONS_DELIVER_IN_WORKER = True
    started = companions.start_all()
    try:
        [thread] = started
        assert isinstance(thread, DeliveryThread)
        assert thread.is_alive()
    finally:
        companions.stop_all(started)
    assert not thread.is_alive()
