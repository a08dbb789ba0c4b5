"""Structured logs: JSON lines with fields, secrets masked, one line per run start and finish."""

from __future__ import annotations

import io
import json
import logging
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_project.logging import JsonFormatter, RedactFilter, logging_config, redact
from tasks.worker.worker import Worker
from tests.factories import RunFactory, TaskFactory


def emit(logger_name: str, *args: object, **kwargs: object) -> dict:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactFilter())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        logger.warning(*args, **kwargs)
    finally:
        logger.removeHandler(handler)
    return json.loads(stream.getvalue())


def test_json_line_carries_extra_fields():
    line = emit("tests.ops", "run finished run=%s", "r1", extra={"run": "r1", "duration": 0.5})
    assert line["message"] == "run finished run=r1"
    assert (line["level"], line["logger"], line["run"], line["duration"]) == (
        "WARNING",
        "tests.ops",
        "r1",
        0.5,
    )
    assert line["time"].endswith("+00:00")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("headers={'Authorization': 'Bearer abc.def.ghi'}", "abc.def.ghi"),
        ("Authorization: Bearer tok3n-value-123", "tok3n-value-123"),
        ("login password=hunter22 failed", "hunter22"),
        ('{"secret": "whsec_123", "url": "https://example.com/hook"}', "whsec_123"),
        ("POST https://hooks.slack.com/services/T00/B00/XXXXSECRET failed", "XXXXSECRET"),
        ("webhook https://example.com/hooks/abc?token=zzz9 timed out", "zzz9"),
        ("connect postgres://app:pa55word@db:5432/app", "pa55word"),
        ("refresh eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJzdWIiOiIxIn0"),
    ],
)
def test_secrets_are_redacted(text, secret):
    assert secret not in redact(text)
    assert secret not in json.dumps(emit("tests.ops", "%s", text))


def test_redaction_keeps_ordinary_text_and_hosts():
    text = "run finished run=1 task=2 attempt=3 outcome=failed duration=0.2"
    assert redact(text) == text
    assert "hooks.slack.com" in redact("POST https://hooks.slack.com/services/T/B/X")


def test_secret_extra_fields_and_tracebacks_are_masked():
    try:
        raise RuntimeError("bad token=abcdef123")
    except RuntimeError:
        line = emit("tests.ops", "failed", exc_info=True, extra={"api_token": "t0k"})
    assert line["api_token"] == "***"
    assert "abcdef123" not in line["exc_info"] and "RuntimeError" in line["exc_info"]


def test_log_format_setting():
    assert logging_config(log_format="json", level="INFO")["handlers"]["console"]["formatter"] == (
        "json"
    )
    with pytest.raises(Exception, match="LOG_FORMAT"):
        logging_config(log_format="xml", level="INFO")


@pytest.mark.django_db(transaction=True)
def test_worker_logs_one_line_per_run_start_and_finish(caplog):
    task = TaskFactory(payload={"name": "noop", "args": {}})
    run = RunFactory(task=task, execute_at=timezone.now() - timedelta(seconds=1))
    caplog.set_level(logging.INFO, logger="tasks.worker")
    worker = Worker(concurrency=1)
    try:
        worker.serve(threading.Event(), once=True)
    finally:
        if worker.watch.conn is not None:  # the watch thread leaves its LISTEN connection open
            worker.watch.conn.close()
    events = [r for r in caplog.records if getattr(r, "event", None)]
    started = [r for r in events if r.event == "run_started"]
    finished = [r for r in events if r.event == "run_finished"]
    assert len(started) == len(finished) == 1
    assert (started[0].run, started[0].task, started[0].attempt) == (str(run.id), str(task.id), 1)
    assert finished[0].outcome == "succeeded" and finished[0].duration >= 0
    assert json.loads(JsonFormatter().format(finished[0]))["outcome"] == "succeeded"
