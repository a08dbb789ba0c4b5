"""`bench day`'s verdict judges each of the service's levels from the day's figures, beside
its floor from the same run."""

from __future__ import annotations

import copy

from bench.day_verdict import lines, verdict


def stats(p95: float, mean: float, p99: float = 0.0) -> dict:
    return {"n": 10, "p95_ms": p95, "p99_ms": p99, "mean_ms": mean, "answered_2xx_pct": 100.0}


DAY = {
    "outside": {
        "api": stats(250.0, 40.0),
        "floor_endpoint": stats(20.0, 5.0),
        "creates": {"answered_2xx_pct": 100.0},
        "reads": {"answered_2xx_pct": 99.995},
        "answers": {
            "not_within_2s": 0,
            "over_2s": 0,
            "unanswered": 0,
            "unanswered_why": {},
            "unanswered_near_api_kill": 0,
            "shed_503": 3,
        },
        "floor_answers": {"not_within_2s": 0},
    },
    "start_lateness": {"all": {"n": 500}, "outside": {"p99_ms": 900.0}},
    "timer_floor": {"p99_ms": 2.0},
    "notifications": {"queued": 40, "delivered": 40, "p99_ms": 1500.0},
    "recurring_expected": 20_000,
    "recurring_not_succeeded": 1,
    "yearly": {"availability_pct": 99.9995, "floor_sql_availability_pct": 99.9998},
}


def by_level(day: dict) -> dict[str, dict]:
    return {row["level"]: row for row in verdict(day)}


def test_a_day_within_every_level_meets_them_all_with_their_floors() -> None:
    rows = by_level(DAY)
    assert all(row["met"] for row in rows.values()), rows
    assert rows["API p95 < 300 ms"]["floor"] == 20.0
    assert rows["start within 10 s (p99 start lateness)"]["floor"] == 2.0
    assert rows["schedule 99.99 % (recurring occurrences succeeded)"]["figure"] == 99.995
    assert lines(verdict(DAY))[0] == f"  verdict: {len(rows)} of {len(rows)} service levels met"


def test_each_level_missed_is_named() -> None:
    day = copy.deepcopy(DAY)
    day["outside"]["api"]["p95_ms"] = 301.0
    day["start_lateness"]["outside"]["p99_ms"] = 10_500.0
    day["notifications"]["delivered"] = 39  # one never arrived, however fast the rest
    day["outside"]["reads"]["answered_2xx_pct"] = 99.98
    day["outside"]["answers"].update(
        not_within_2s=3, over_2s=1, over_2s_client_pool=1, unanswered=2, unanswered_why={"reset": 2}
    )
    day["outside"]["answers"]["unanswered_near_api_kill"] = 2
    missed = {level for level, row in by_level(day).items() if not row["met"]}
    assert missed == {
        "API p95 < 300 ms",
        "start within 10 s (p99 start lateness)",
        "notifications within 10 minutes (p99, every one delivered)",
        "read 99.99 % (2xx outside fault windows)",
        "every API request answered within 2 s, 2xx or 503 (requests that were not)",
        "notify 99.99 % (delivered)",
    }
    printed = lines(verdict(day), day["outside"]["answers"])
    at = next(i for i, line in enumerate(printed) if "within 2 s, 2xx or 503" in line)
    assert printed[at].startswith("    NOT met every API request answered within 2 s")
    assert printed[at + 1].strip() == (
        "over 2 s 1 (1 only for the load generator's pool), unanswered 2"
        " (reset 2; 2 near an API process SIGKILL); 503 3"
    )
    assert any(
        line.startswith("    NOT met API p95 < 300 ms: 301.0 ms") for line in lines(verdict(day))
    )
