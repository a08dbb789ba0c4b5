"""A database outage is logged when it begins and when it ends, whatever fails in between."""

from __future__ import annotations

import logging

from django.db import OperationalError

from tasks.outages import OutageLog


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tasks.outages"]


def test_an_outage_is_one_line_when_it_begins_and_one_when_it_ends(caplog):
    outage = OutageLog()
    with caplog.at_level(logging.INFO, logger="tasks.outages"):
        outage.recovered(what="connected")  # nothing was down: nothing to say
        for what in ("pass", "listener", "pass"):
            outage.failed(OperationalError("connection refused"), what=what)
        assert outage.down
        outage.recovered(what="connected")
        outage.recovered(what="connected")
    first, last = messages(caplog)
    assert first.startswith("database unavailable (pass: OperationalError: connection refused)")
    assert last.startswith("database available again (connected) after ")
    assert last.endswith("; failures meanwhile: 3")
    assert not outage.down


def test_the_next_outage_is_told_again(caplog):
    outage = OutageLog()
    with caplog.at_level(logging.INFO, logger="tasks.outages"):
        for _ in range(2):
            outage.failed(OperationalError("gone"), what="pass")
            outage.recovered(what="connected")
    assert len(messages(caplog)) == 4
    assert messages(caplog)[3].endswith("; failures meanwhile: 1")
