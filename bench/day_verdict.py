"""The service's levels (its targets for latency, lateness, delivery and availability), each
judged from `bench day`'s figures beside its floor from the same run (docs/benchmarks.md, "A
production day, with faults"): the last lines of the printout.

Latency levels are judged outside the Patroni fault windows (a fault's window is its own
figure); availability over a year counts one leader crash a month at the write gap this run
measured. A level with no floor of its own (nothing simpler delivers a notification) says so.
"""

from __future__ import annotations

TARGET_PCT = 99.99


def _pct(part: float, whole: float) -> float:
    return round(100 * part / whole, 4) if whole else 100.0


def verdict(f: dict) -> list[dict]:
    """One row per level: what it asks, the figure, the floor, and whether the figure meets it."""
    outside, late, notes = f["outside"], f["start_lateness"], f["notifications"]
    api, floor = outside["api"], outside["floor_endpoint"]
    rows = [
        ("API p95 < 300 ms", api["p95_ms"], floor["p95_ms"], api["p95_ms"] < 300, "ms"),
        ("API average < 100 ms", api["mean_ms"], floor["mean_ms"], api["mean_ms"] < 100, "ms"),
        (
            "start within 10 s (p99 start lateness)",
            late["outside"]["p99_ms"],
            f["timer_floor"]["p99_ms"],
            late["all"]["n"] > 0 and late["outside"]["p99_ms"] < 10_000,
            "ms",
        ),
        (
            "notifications within 10 minutes (p99, every one delivered)",
            notes["p99_ms"],
            None,
            notes["delivered"] == notes["queued"] and notes["p99_ms"] < 600_000,
            "ms",
        ),
    ]
    yearly = f.get("yearly")
    if yearly:
        rows.append(
            (
                f"create {TARGET_PCT} % (a year, a leader crash a month)",
                yearly["availability_pct"],
                yearly["floor_sql_availability_pct"],
                yearly["availability_pct"] >= TARGET_PCT,
                "%",
            )
        )
    answers = outside.get("answers")
    if answers is not None:
        rows.append(
            (
                "every API request answered within 2 s, 2xx or 503 (requests that were not)",
                answers["not_within_2s"],
                outside["floor_answers"]["not_within_2s"],
                answers["not_within_2s"] == 0,
                "requests",
            )
        )
    creates, reads = outside["creates"], outside["reads"]
    rows += [
        (
            f"create {TARGET_PCT} % (2xx outside fault windows)",
            creates["answered_2xx_pct"],
            floor["answered_2xx_pct"],
            creates["answered_2xx_pct"] >= TARGET_PCT,
            "%",
        ),
        (
            f"read {TARGET_PCT} % (2xx outside fault windows)",
            reads["answered_2xx_pct"],
            floor["answered_2xx_pct"],
            reads["answered_2xx_pct"] >= TARGET_PCT,
            "%",
        ),
    ]
    scheduled = _pct(
        f["recurring_expected"] - f["recurring_not_succeeded"], f["recurring_expected"]
    )
    notified = _pct(notes["delivered"], notes["queued"])
    rows += [
        (
            f"schedule {TARGET_PCT} % (recurring occurrences succeeded)",
            scheduled,
            None,
            scheduled >= TARGET_PCT,
            "%",
        ),
        (f"notify {TARGET_PCT} % (delivered)", notified, None, notified >= TARGET_PCT, "%"),
    ]
    return [
        {"level": level, "figure": figure, "floor": floor_figure, "met": met, "unit": unit}
        for level, figure, floor_figure, met, unit in rows
    ]


def lines(rows: list[dict], answers: dict | None = None) -> list[str]:
    """The verdict's lines; with `answers` (outside the fault windows, bench/day_report.py's),
    the level "answered within 2 s" is followed by what was not, and why."""
    met = sum(row["met"] for row in rows)
    out = [f"  verdict: {met} of {len(rows)} service levels met"]
    for row in rows:
        floor = "no floor" if row["floor"] is None else f"floor {row['floor']} {row['unit']}"
        word = "met    " if row["met"] else "NOT met"
        out.append(f"    {word} {row['level']}: {row['figure']} {row['unit']} ({floor})")
        if answers is not None and "within 2 s" in row["level"]:
            why = ", ".join(f"{k} {n}" for k, n in answers["unanswered_why"].items()) or "none"
            out.append(
                f"            over 2 s {answers['over_2s']}"
                f" ({answers.get('over_2s_client_pool', 0)} only for the load generator's pool),"
                f" unanswered {answers['unanswered']}"
                f" ({why}; {answers['unanswered_near_api_kill']} near an API process SIGKILL);"
                f" 503 {answers['shed_503']}"
            )
    return out
