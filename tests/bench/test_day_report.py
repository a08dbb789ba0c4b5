"""bench day's answers: what was not answered within 2 s, why, and how much of it followed an API
process's SIGKILL."""

from __future__ import annotations

from bench.day_load import REFUSED, RESET, TIMEOUT_, UNSENT
from bench.day_report import answers, answers_line

KILL = 1000.0


def sample(kind: str, wall: float, ms: float, status: int, why: str = "", retried=False, pool=0.0):
    return (kind, wall, ms, status, None, why, retried, pool)


SAMPLES = [
    sample("task_list", 900.0, 12.0, 200),
    sample("create", 901.0, 2500.0, 201, pool=1000.0),  # late for the client's pool alone
    sample("task_detail", 999.5, 800.0, 0, RESET),  # in flight at the kill
    sample("create", 1002.0, 30.0, 0, RESET, retried=True),  # sent 2 s after it, twice
    sample("run_detail", 1003.0, 2100.0, 200, retried=True),  # retried, answered late
    sample("task_runs", 1004.0, 5.0, 0, RESET, retried=True),  # retried, reset again
    sample("task_list", 1020.0, 30_000.0, 0, TIMEOUT_),  # long after the kill
    sample("task_list", 1030.0, 1.0, 0, REFUSED),
    sample("create", 1040.0, 40_000.0, 0, UNSENT),
    # Intended before the kill, but left the pool 10 s after it: not near it.
    sample("task_list", 995.0, 16_000.0, 0, UNSENT, pool=15_000.0),
    sample("task_list", 1050.0, 1500.0, 503),
]


def test_answers_count_the_late_and_the_unanswered_with_why_and_the_kills_near_them() -> None:
    a = answers(SAMPLES, [KILL])
    assert a["requests"] == 11
    assert a["shed_503"] == 1
    assert a["over_2s"] == 2
    assert a["over_2s_statuses"] == {200: 1, 201: 1}
    assert a["over_2s_near_api_kill"] == 1
    assert a["over_2s_client_pool"] == 1  # the other one took 2.1 s after it was sent
    assert a["client_pool_wait"]["max_ms"] == 15_000.0
    assert a["unanswered"] == 7
    assert a["unanswered_why"] == {REFUSED: 1, RESET: 3, TIMEOUT_: 1, UNSENT: 2}
    assert a["unanswered_creates"] == 2
    assert a["unanswered_near_api_kill"] == 3
    assert a["not_within_2s"] == 9
    assert (a["retried"], a["retried_creates"], a["retried_answered"]) == (3, 1, 1)


def test_without_a_kill_nothing_is_near_one_and_the_line_says_all() -> None:
    a = answers(SAMPLES, [])
    assert a["unanswered_near_api_kill"] == a["over_2s_near_api_kill"] == 0
    line = answers_line(a)
    assert line.startswith("503 1; over 2 s 2 {200: 1, 201: 1}")
    assert "unanswered 7 (2 creates; refused 1, reset 3, timeout 1, unsent 2;" in line


def test_a_day_of_answers_within_2_s_has_nothing_to_explain() -> None:
    a = answers([sample("task_list", 1.0, 1999.0, 200), sample("create", 2.0, 5.0, 503)], [])
    assert a["not_within_2s"] == 0
    assert a["unanswered_why"] == {}
    assert "unanswered 0 (0 creates; none;" in answers_line(a)
