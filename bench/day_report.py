"""The figures of `bench day`, each beside its floor from the same run, and their printout.

Windows: a Patroni fault's window runs from the fault to 5 s after the cluster is whole again
(every member streaming); requests are "inside" when sent in one, "outside" otherwise. The role
kills (one every 30 s) fall on both sides. Write unavailability of a fault: the longest time
between two acknowledged creates (by send time) from the fault until 30 s after its window,
to the create interval's precision (1/writes); the floor is the same for plain SQL INSERTs sent
every 100 ms.

Answers (`answers`): every request is to be answered within 2 s, 2xx or 503 with Retry-After.
What was not: answered later than 2 s, or not at all (status 0), each with why
(bench/day_load.py's FAILURES) and how many were in flight when an API process was SIGKILLed or
sent within NEAR_KILL_SECONDS after (gunicorn's master forks its replacement meanwhile), counted
from when each left the load generator's pool.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import psycopg

from bench.day_faults import Fault, SqlFloor
from bench.day_load import FAILURES
from bench.day_seed import RETENTION_DAYS, Seeded
from bench.day_verdict import TARGET_PCT, verdict
from bench.day_verdict import lines as verdict_lines
from bench.proc import percentile

YEAR_SECONDS = 365.25 * 86400
AFTER_WINDOW = 5.0
ANSWER_WITHIN_MS = 2000.0
NEAR_KILL_SECONDS = 5.0
API_KILL = "SIGKILL API process"


def _pcts(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50_ms": round(percentile(ordered, 50), 1),
        "p95_ms": round(percentile(ordered, 95), 1),
        "p99_ms": round(percentile(ordered, 99), 1),
        "max_ms": round(ordered[-1], 1) if ordered else 0.0,
        "mean_ms": round(sum(ordered) / len(ordered), 1) if ordered else 0.0,
    }


def _gap(times: list[float], since: float, until: float, end: float) -> float:
    """The longest time between consecutive `times` (sorted) from `since` to `until`, the one
    before `since` and the first after `until` included; with none after, the run's `end`
    closes the chain (a lower bound)."""
    before = [t for t in times if t < since][-1:] or [since]
    inside = [t for t in times if since <= t <= until]
    after = [t for t in times if t > until][:1] or [end]
    chain = before + inside + after
    return round(max(b - a for a, b in itertools.pairwise(chain)), 2)


def answers(samples: list[tuple], api_kills: list[float]) -> dict:
    """What was not answered within 2 s among `samples` (bench/day_load.py's), and why; `api_kills`
    the times API processes were SIGKILLed."""

    def near_kill(s: tuple) -> bool:
        # At the server from when it left the load generator's pool to its end.
        sent, ended = s[1] + (s[7] if len(s) > 7 else 0.0) / 1000, s[1] + s[2] / 1000
        return any(sent <= k + NEAR_KILL_SECONDS and ended >= k for k in api_kills)

    unanswered = [s for s in samples if s[3] == 0]
    late = [s for s in samples if s[3] != 0 and s[2] > ANSWER_WITHIN_MS]
    # Late only for the client's own queue: answered within 2 s of leaving it.
    pool_late = [s for s in late if len(s) > 7 and s[2] - s[7] <= ANSWER_WITHIN_MS]
    retried = [s for s in samples if len(s) > 6 and s[6]]
    return {
        "requests": len(samples),
        "shed_503": sum(1 for s in samples if s[3] == 503),
        "over_2s": len(late),
        "over_2s_statuses": dict(sorted(Counter(s[3] for s in late).items())),
        "unanswered": len(unanswered),
        "unanswered_why": {
            why: n
            for why in FAILURES
            if (n := sum(1 for s in unanswered if len(s) > 5 and s[5] == why))
        },
        "unanswered_creates": sum(1 for s in unanswered if s[0] == "create"),
        "unanswered_near_api_kill": sum(1 for s in unanswered if near_kill(s)),
        "over_2s_near_api_kill": sum(1 for s in late if near_kill(s)),
        "over_2s_client_pool": len(pool_late),
        "client_pool_wait": _pcts([s[7] for s in samples if len(s) > 7]),
        "not_within_2s": len(unanswered) + len(late),
        "retried": len(retried),
        "retried_creates": sum(1 for s in retried if s[0] == "create"),
        "retried_answered": sum(1 for s in retried if s[3] != 0),
    }


def answers_line(a: dict) -> str:
    """One line: the 503s, the answers past 2 s and the requests with none, and why."""
    why = ", ".join(f"{k} {n}" for k, n in a["unanswered_why"].items()) or "none"
    return (
        f"503 {a['shed_503']}; over 2 s {a['over_2s']} {a['over_2s_statuses']}"
        f" ({a['over_2s_near_api_kill']} near an API process SIGKILL,"
        f" {a['over_2s_client_pool']} answered within 2 s of leaving the load generator's pool:"
        f" its wait p99 {a['client_pool_wait']['p99_ms']} ms); unanswered"
        f" {a['unanswered']} ({a['unanswered_creates']} creates; {why};"
        f" {a['unanswered_near_api_kill']} near an API process SIGKILL); sent again to the"
        f" other server after a reset or a cut {a['retried']} ({a['retried_creates']} creates,"
        f" {a['retried_answered']} answered)"
    )


def figures(
    *,
    url: str,
    start: float,
    end: float,
    samples: list[tuple],
    lines: list[tuple[str, float, float]],
    arrivals: dict[str, list[float]],
    unverified: int,
    sql_floor: SqlFloor,
    timer: dict,
    patroni: list[Fault],
    patroni_errors: list[str],
    kills: list[Fault],
    seeded: Seeded,
    old_history: int,
    drained: float,
    exited: list[str],
    cpu: dict[str, float],
    options: dict,
) -> dict:
    windows = [(f.start, (f.end or f.start) + AFTER_WINDOW) for f in patroni]

    def inside(t: float) -> bool:
        return any(a <= t <= b for a, b in windows)

    api_kills = [k.start for k in kills if k.name.startswith(API_KILL)]

    api = [s for s in samples if s[0] != "floor"]
    floor = [s for s in samples if s[0] == "floor"]
    out: dict = {"workload": "day", **options, "seconds": round(end - start, 1)}

    def availability(group: list) -> dict:
        statuses = Counter(s[3] for s in group)
        total = max(1, len(group))
        ok = sum(n for code, n in statuses.items() if 200 <= code < 300)
        return {
            "requests": len(group),
            "not_503_pct": round(100 * (1 - statuses[503] / total), 4),
            "answered_2xx_pct": round(100 * ok / total, 4),
            "statuses": dict(sorted(statuses.items())),
        }

    for side, keep in (("outside", lambda t: not inside(t)), ("inside", inside)):
        mine = [s for s in api if keep(s[1])]
        floors = [s for s in floor if keep(s[1])]
        selects = [ms for t, ms in sql_floor.selects if keep(t)]
        out[side] = {
            "api": {**availability(mine), **_pcts([s[2] for s in mine])},
            "creates": availability([s for s in mine if s[0] == "create"]),
            "reads": availability([s for s in mine if s[0] != "create"]),
            "answers": answers(mine, api_kills),
            "floor_answers": answers(floors, api_kills),
            "floor_endpoint": {**availability(floors), **_pcts([s[2] for s in floors])},
            "select_1": {
                **_pcts(selects),
                "failed": sum(1 for t in sql_floor.failed_selects if keep(t)),
            },
        }
    out["api_all"] = availability(api)
    out["floor_endpoint_all"] = availability(floor)

    # A create's 200 is the answer to a repeated dedup key: the task a first send made.
    creates = sorted(s[1] for s in api if s[0] == "create" and s[3] in (200, 201))
    raw_writes = sorted(sql_floor.writes)
    per_fault = []
    for fault in patroni:
        until = (fault.end or fault.start) + AFTER_WINDOW + 30
        per_fault.append(
            {
                "fault": fault.name,
                "detail": fault.detail,
                "window_s": round((fault.end or fault.start) - fault.start, 1),
                "writes_unavailable_s": _gap(creates, fault.start, until, end),
                "floor_sql_writes_unavailable_s": _gap(raw_writes, fault.start, until, end),
            }
        )
    out["patroni_faults"] = per_fault
    out["patroni_errors"] = patroni_errors
    by_role: dict[str, list[float]] = {}
    floor_by_role: dict[str, list[float]] = {}
    for kill in kills:
        kind = kill.name.removeprefix("SIGKILL ").rsplit(" ", 1)[0]
        until = (kill.end or kill.start) + 10
        by_role.setdefault(kind, []).append(_gap(creates, kill.start, until, end))
        floor_by_role.setdefault(kind, []).append(_gap(raw_writes, kill.start, until, end))
    out["role_kills"] = {
        kind: {
            "kills": len(gaps),
            "writes_unavailable_max_s": max(gaps),
            "writes_unavailable_median_s": sorted(gaps)[len(gaps) // 2],
            "floor_sql_max_s": max(floor_by_role[kind]),
        }
        for kind, gaps in sorted(by_role.items())
    }
    out["role_exits_outside_kills"] = exited

    in_window = [(k, sch, st) for k, sch, st in lines if start <= sch < end]
    late = {
        "all": _pcts([(st - sch) * 1000 for _, sch, st in in_window]),
        "outside": _pcts([(st - sch) * 1000 for _, sch, st in in_window if not inside(sch)]),
        "inside": _pcts([(st - sch) * 1000 for _, sch, st in in_window if inside(sch)]),
        "early": sum(1 for _, sch, st in in_window if st < sch),
    }
    out["start_lateness"] = late
    out["timer_floor"] = timer
    keys = Counter(k for k, _, _ in lines)
    out["payload_executed_twice"] = sum(1 for n in keys.values() if n > 1)
    out["worker_kills"] = sum(1 for k in kills if k.name.startswith("SIGKILL worker"))

    acknowledged = {s[4] for s in api if s[0] == "create" and s[3] in (200, 201) and s[4]}
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        stored = {
            str(i)
            for (i,) in conn.execute(
                "SELECT id FROM tasks_task WHERE schedule_type = 'once' AND id = ANY(%s::uuid[])",
                [list(acknowledged)],
            )
        }
        out["acknowledged_creates"] = len(acknowledged)
        out["lost"] = len(acknowledged - stored)
        out["recorded_twice"] = conn.execute(
            "SELECT count(*) FROM (SELECT run_id FROM tasks_attempt WHERE outcome = 'succeeded'"
            " GROUP BY run_id HAVING count(*) > 1) AS d"
        ).fetchone()[0]
        out["occurrences_doubled"] = conn.execute(
            "SELECT count(*) FROM (SELECT task_id, scheduled_at FROM tasks_run"
            " GROUP BY task_id, scheduled_at HAVING count(*) > 1) AS d"
        ).fetchone()[0]
        out["runs_in_window"] = dict(
            conn.execute(
                "SELECT status, count(*) FROM tasks_run WHERE scheduled_at >= to_timestamp(%s)"
                " AND scheduled_at < to_timestamp(%s) GROUP BY status ORDER BY status",
                [start, end],
            ).fetchall()
        )
        # Every occurrence of a seeded task due in the window: start_at + k * every < end.
        expected, missing = conn.execute(
            """
            WITH t AS (
                SELECT id, (schedule ->> 'start_at')::timestamptz AS first,
                       (schedule ->> 'every')::float AS every
                  FROM tasks_task WHERE owner_id = %(owner)s AND schedule_type = 'interval'
            ), want AS (
                SELECT id, greatest(0, ceil(extract(epoch FROM to_timestamp(%(end)s) - first)
                                            / every))::int AS n
                  FROM t
            ), got AS (
                SELECT task_id, count(*) AS n FROM tasks_run
                 WHERE owner_id = %(owner)s AND status = 'succeeded'
                   AND scheduled_at >= to_timestamp(%(start)s) - interval '1 second'
                   AND scheduled_at < to_timestamp(%(end)s)
                 GROUP BY task_id
            )
            SELECT sum(want.n), sum(greatest(0, want.n - coalesce(got.n, 0)))
              FROM want LEFT JOIN got ON got.task_id = want.id
            """,
            {"owner": seeded.owner, "start": start, "end": end},
        ).fetchone()
        out["recurring_expected"] = int(expected or 0)
        out["recurring_not_succeeded"] = int(missing or 0)
        out["history_past_retention"] = {
            "before": old_history,
            "after": conn.execute(
                "SELECT count(*) FROM tasks_run WHERE finished_at < now() - %s",
                [timedelta(days=RETENTION_DAYS)],
            ).fetchone()[0],
        }
        notifications = conn.execute(
            "SELECT n.id::text, extract(epoch FROM r.finished_at), n.status"
            " FROM notifications_notification n JOIN tasks_run r ON r.id = n.run_id"
            " WHERE r.scheduled_at >= to_timestamp(%s) AND r.scheduled_at < to_timestamp(%s)",
            [start, end],
        ).fetchall()
    delays = [
        (arrivals[i][0] - float(finished)) * 1000
        for i, finished, _ in notifications
        if arrivals.get(i)
    ]
    out["notifications"] = {
        "queued": len(notifications),
        "delivered": len(delays),
        "statuses": dict(Counter(status for _, _, status in notifications)),
        "duplicates": sum(len(a) - 1 for a in arrivals.values()),
        "bad_signatures": unverified,
        **_pcts(delays),
    }
    out["drain_s"] = drained
    out["cpu_seconds"] = cpu

    kill = next((f for f in per_fault if f["fault"] == "leader host killed"), None)
    switch = next((f for f in per_fault if f["fault"] == "Patroni switchover"), None)
    if kill:
        down = 12 * kill["writes_unavailable_s"]
        floor_down = 12 * kill["floor_sql_writes_unavailable_s"]
        both = down + 12 * (switch["writes_unavailable_s"] if switch else 0)
        out["yearly"] = {
            "failover_a_month_unavailable_s": round(down, 1),
            "availability_pct": round(100 * (1 - down / YEAR_SECONDS), 5),
            "with_a_switchover_a_month_pct": round(100 * (1 - both / YEAR_SECONDS), 5),
            "floor_sql_availability_pct": round(100 * (1 - floor_down / YEAR_SECONDS), 5),
            "target_pct": TARGET_PCT,
            "budget_s": round(YEAR_SECONDS * (1 - TARGET_PCT / 100), 1),
        }
    out["verdict"] = verdict(out)
    return out


def print_figures(f: dict, write: Callable[[str], None]) -> None:
    write()
    write(
        f"bench day: {f['tasks']:,} tasks, {f['reads']:g} reads/s + {f['writes']:g} creates/s"
        f" + {f['floors']:g} floor requests/s for {f['seconds']:.0f} s"
        f" (load average {f['machine']['load_average']})"
    )
    for side in ("outside", "inside"):
        s = f[side]
        a, fl, sel = s["api"], s["floor_endpoint"], s["select_1"]
        write(
            f"  {side} Patroni fault windows: API {a['requests']:,} requests, not 503"
            f" {a['not_503_pct']} %, 2xx {a['answered_2xx_pct']} % {a['statuses']};"
            f" p95 {a['p95_ms']} / p99 {a['p99_ms']} ms"
        )
        write(
            f"    floor: trivial endpoint p95 {fl['p95_ms']} / p99 {fl['p99_ms']} ms"
            f" (2xx {fl['answered_2xx_pct']} %); SELECT 1 p95 {sel['p95_ms']} / p99"
            f" {sel['p99_ms']} ms ({sel['failed']} failed)"
        )
        write(f"    API answers: {answers_line(s['answers'])}")
        write(f"    floor answers: {answers_line(s['floor_answers'])}")
    late, t = f["start_lateness"], f["timer_floor"]
    write(
        f"  start lateness ({late['all']['n']:,} bodies due in the window): p50"
        f" {late['all']['p50_ms']} / p99 {late['all']['p99_ms']} / max {late['all']['max_ms']} ms;"
        f" outside windows p99 {late['outside']['p99_ms']}, inside p99 {late['inside']['p99_ms']}"
        f" ms; early {late['early']}; floor (a sleeping thread) p99 {t['p99_ms']} / max"
        f" {t['max_ms']} ms"
    )
    n = f["notifications"]
    write(
        f"  notifications: {n['delivered']:,}/{n['queued']:,} delivered, run finished -> arrived"
        f" p50 {n['p50_ms']} / p99 {n['p99_ms']} / max {n['max_ms']} ms; duplicates"
        f" {n['duplicates']}, bad signatures {n['bad_signatures']}"
    )
    for p in f["patroni_faults"]:
        write(
            f"  {p['fault']} ({p['detail']}): writes unavailable {p['writes_unavailable_s']} s;"
            f" floor (plain SQL INSERT every 100 ms) {p['floor_sql_writes_unavailable_s']} s"
        )
    for error in f["patroni_errors"]:
        write(f"  FAULT FAILED: {error}")
    for kind, k in f["role_kills"].items():
        write(
            f"  SIGKILL {kind} x{k['kills']}: writes unavailable max"
            f" {k['writes_unavailable_max_s']} s, median {k['writes_unavailable_median_s']} s"
            f" (floor max {k['floor_sql_max_s']} s)"
        )
    h = f["history_past_retention"]
    write(
        f"  runs due in the window {f['runs_in_window']}; recurring occurrences expected"
        f" {f['recurring_expected']:,}, not succeeded {f['recurring_not_succeeded']:,};"
        f" retention: runs past 30 days {h['before']:,} -> {h['after']:,}; drained in"
        f" {f['drain_s']} s"
    )
    write(
        f"  lost {f['lost']} (of {f['acknowledged_creates']:,} acknowledged creates); recorded"
        f" twice {f['recorded_twice']}; occurrences doubled {f['occurrences_doubled']}; payload"
        f" executed twice {f['payload_executed_twice']} (worker SIGKILLs: {f['worker_kills']});"
        f" roles exited unasked {f['role_exits_outside_kills'] or 0}"
    )
    write(
        "  CPU seconds in the window (of "
        f"{2 * f['seconds']:.0f} on 2 cores): "
        + ", ".join(f"{group} {seconds}" for group, seconds in f["cpu_seconds"].items())
    )
    if "yearly" in f:
        y = f["yearly"]
        write(
            f"  yearly, one failover a month: {y['failover_a_month_unavailable_s']} s of writes"
            f" unavailable, {y['availability_pct']} % (with a switchover a month too"
            f" {y['with_a_switchover_a_month_pct']} %; plain SQL {y['floor_sql_availability_pct']}"
            f" %) against {y['target_pct']} % ({y['budget_s']} s a year)"
        )
    for line in verdict_lines(f["verdict"], f["outside"].get("answers")):
        write(line)
