"""`python -m bench day`: a production day, time-compressed, on a three-node Patroni cluster,
lived through with faults (docs/benchmarks.md, "A production day, with faults").

The rig of bench/patroni_cluster.py; every role a real process on the three-host URL: 3
schedulers, 2 workers (`--concurrency 4`, delivering notifications), 2 reviewers (retention
every 10 s at 30 days), 2 API servers (gunicorn, two workers of two threads each, so that one
accepts while the other is replaced, as docs/operations.md advises; reads through
`DATABASE_REPLICA_URL` prefer-standby). The tasks of bench/day_seed.py; the API load of
bench/day_load.py in its own process; the faults of bench/day_faults.py. Afterwards every run
due in the window must finish, then the figures are computed from the run's own records: the
API's answers, the job bodies' lines (bench/handlers.py), the webhook receiver's arrivals, and
the raw-SQL floor's samples. Printed first, the profile of bench/day_profile.py: PostgreSQL's
time per statement family (pg_stat_statements on every node) and each role's CPU, per run executed
and per API request (its inputs kept in the logs' folder as profile.json, `--keep`); then the
figures, and last their verdict.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from cryptography.fernet import Fernet
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from bench import (
    BenchError,
    apiserver,
    day_faults,
    day_load,
    day_profile,
    day_report,
    day_seed,
    proc,
)
from bench.handlers import read_lines
from bench.patroni_cluster import PatroniCluster, can_run
from bench.timer_floor import TimerFloor
from bench.webhook import Receiver
from notifications import services as notification_services
from scheduler_project.database import database_config

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "scheduler"
# From the start of seeding to the window's start: room for the seeding (about 1 s per 1,000
# tasks on a busy machine), then for the schedulers to plan the first minute.
LEAD_SECONDS, LEAD_PER_TASK = 20.0, 0.002
DRAIN_SECONDS = 240.0
LIST_PAGES = 20  # list reads page through the first 20 pages, as a dashboard or a script does
SCHEDULERS, WORKERS, REVIEWERS, APIS = 3, 2, 2, 2
ROLE_SETTINGS = {
    "LOG_LEVEL": "WARNING",
    "PYTHONUNBUFFERED": "1",
    "SCHEDULER_HANDLER_MODULES": "bench.handlers",
    "SCHEDULER_OUTBOUND_ALLOW": "127.0.0.1",
    "NOTIFICATIONS_DELIVER_IN_WORKER": "true",
    "REVIEWERS_RETENTION_DAYS": str(day_seed.RETENTION_DAYS),
    "REVIEWERS_PRUNE_INTERVAL_SECONDS": "10",
}


@dataclass
class Role:
    name: str
    args: tuple[str, ...]
    process: subprocess.Popen | None = None


class Roles:
    """The scheduler, worker and reviewer processes, each restartable in its slot."""

    def __init__(self, env: dict[str, str], logdir: Path) -> None:
        self.env, self.logdir, self.slots = env, logdir, []  # type: list[Role]
        self.started = 0

    def add(self, name: str, *args: str) -> Role:
        role = Role(name, args)
        self.slots.append(role)
        self.start(role)
        return role

    def start(self, role: Role) -> None:
        self.started += 1
        log = (self.logdir / f"{role.name.replace(' ', '-')}-{self.started}.log").open("wb")
        role.process = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *role.args],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill(self, role: Role) -> int | None:
        if role.process is None:
            return None
        role.process.kill()
        role.process.wait()
        return role.process.pid

    def exited(self) -> list[str]:
        return [r.name for r in self.slots if r.process is not None and r.process.poll()]

    def stop(self) -> None:
        running = [r.process for r in self.slots if r.process and r.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _manage(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        raise BenchError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")


def _point_django_at(url: str) -> dict:
    """The harness's own connection to the cluster (the same three-host read-write URL)."""
    before = dict(settings.DATABASES["default"])
    connection.close()
    config = database_config(url)
    settings.DATABASES["default"].update(config)
    connection.settings_dict.update(config)
    return before


def _restore_django(before: dict) -> None:
    connection.close()
    settings.DATABASES["default"].clear()
    settings.DATABASES["default"].update(before)
    connection.settings_dict.clear()
    connection.settings_dict.update(before)


def _api_victim(server: apiserver.Gunicorn) -> Callable[[], int | None]:
    def kill() -> int | None:
        pids = server.worker_pids()
        if not pids:
            return None
        os.kill(pids[0], signal.SIGKILL)  # its master forks a new worker at once
        return pids[0]

    return kill


def measure(
    *,
    minutes: float,
    tasks: int,
    reads: float,
    writes: float,
    floors: float,
    keep: bool,
    emit: Callable[[dict], None],
    write: Callable[[str], None],
) -> dict:
    if not can_run():
        raise BenchError("needs Debian's patroni, etcd and PostgreSQL 15 (bench/patroni_cluster)")
    if minutes <= 0 or tasks < 100:
        raise BenchError("--minutes must be positive and --tasks at least 100")
    seconds = minutes * 60
    if not settings.SCHEDULER_ENCRYPTION_KEY:  # a key of its own for the webhook's secret
        settings.SCHEDULER_ENCRYPTION_KEY = Fernet.generate_key().decode()
    run_dir = Path(tempfile.mkdtemp(prefix="bench-day-"))
    run_dir.chmod(0o755)
    records = run_dir / "records"
    records.mkdir()
    cluster = PatroniCluster(parameters=day_profile.PARAMETERS)
    servers: list[apiserver.Gunicorn] = []
    roles: Roles | None = None
    before: dict | None = None
    load: mp.process.BaseProcess | None = None
    probes: list = []
    ok = False
    try:
        booted = time.monotonic()
        cluster.start(timeout=120)
        cluster.healthy().sql(f"CREATE DATABASE {DATABASE}")
        cluster.healthy().sql("CREATE EXTENSION pg_stat_statements", database=DATABASE)
        url = cluster.url(DATABASE)
        env = {
            **os.environ,
            **ROLE_SETTINGS,
            "DATABASE_URL": url,
            "BENCH_RUN_DIR": str(records),
            "SECRET_KEY": settings.SECRET_KEY,
            "SCHEDULER_ENCRYPTION_KEY": settings.SCHEDULER_ENCRYPTION_KEY,
        }
        env.pop("DATABASE_REPLICA_URL", None)
        _manage(env, "migrate", "--verbosity", "0")
        before = _point_django_at(url)
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TABLE bench_day_floor (id bigserial PRIMARY KEY,"
                " at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
        write(f"cluster up and migrated in {time.monotonic() - booted:.0f} s")
        secret = secrets.token_urlsafe(24)
        with Receiver(secret) as receiver:
            owner = get_user_model().objects.get_or_create(username=day_seed.USERNAME)[0]
            channel = notification_services.create_channel(
                owner=owner,
                data={"kind": "webhook", "config": {"url": receiver.url, "secret": secret}},
            )
            api_env = {  # beside what apiserver.Gunicorn sets itself
                "LOG_LEVEL": "WARNING",
                "SCHEDULER_ENCRYPTION_KEY": settings.SCHEDULER_ENCRYPTION_KEY,
                "DATABASE_REPLICA_URL": cluster.replica_url(DATABASE),
            }
            for i in range(APIS):
                folder = run_dir / f"api-{i + 1}"
                folder.mkdir()
                server = apiserver.Gunicorn(url, 2, str(folder), threads=2, env=api_env)
                servers.append(server)
                server.start()
            roles = Roles(env, run_dir)
            for i in range(SCHEDULERS):
                roles.add(f"scheduler {i + 1}", "runscheduler")
            for i in range(WORKERS):
                roles.add(f"worker {i + 1}", "runworker", "--concurrency", "4")
            for i in range(REVIEWERS):
                roles.add(f"reviewer {i + 1}", "runreviewer")
            seeding = time.monotonic()
            lead = LEAD_SECONDS + LEAD_PER_TASK * tasks
            t0 = datetime.now(UTC) + timedelta(seconds=lead)
            seeded = day_seed.seed(tasks=tasks, t0=t0, seconds=seconds, channel=str(channel.id))
            old_history = _old_history()
            write(
                f"seeded {tasks:,} tasks ({seeded.daily:,} daily, {seeded.minute:,} every minute,"
                f" {seeded.frequent:,} every few seconds) and {seeded.history:,} finished runs"
                f" ({old_history:,} past retention) in {time.monotonic() - seeding:.0f} s"
            )
            token = _token(day_seed.USERNAME, lifetime=timedelta(seconds=seconds + 3600))
            connection.close()  # nothing of Django's crosses the fork
            wait = (t0 - datetime.now(UTC)).total_seconds()
            if wait < 2:
                raise BenchError(f"seeding overran the {lead:g} s lead by {-wait:.0f} s")
            time.sleep(wait)
            statements = day_profile.StatementLedger(
                lambda: {m.name: m.dsn for m in cluster.members}, DATABASE
            )
            statements.reset()
            start = time.time()
            statements.start()
            ctx = {
                "ports": [s.port for s in servers],
                "token": token,
                "task_ids": [str(t) for t in seeded.task_ids],
                "run_ids": [str(r) for r in seeded.run_ids],
                "pages": min(LIST_PAGES, max(1, tasks // 50)),
                "reads": reads,
                "writes": writes,
                "floors": floors,
                "seconds": seconds,
                "seed": 7,
                "threads": 96,
            }
            queue = mp.get_context("fork").Queue()
            load = mp.get_context("fork").Process(target=day_load.run, args=(ctx, queue))
            load.start()
            sql_floor = day_faults.SqlFloor(url)
            timer = TimerFloor(step=0.05)
            patroni = day_faults.PatroniFaults(
                cluster,
                [(start + seconds / 3, "switchover"), (start + 2 * seconds / 3, "leader kill")],
            )
            probes = [sql_floor, timer, patroni]
            for thread in probes:
                thread.start()
            probes.append(statements)
            groups = _groups(cluster, servers, roles, load.pid)
            ledger = CpuLedger(groups)
            victims = [
                day_faults.Victim(r.name, lambda r=r: roles.kill(r), lambda r=r: roles.start(r))
                for r in roles.slots
            ] + [
                day_faults.Victim(f"API process {i + 1}", _api_victim(s), None)
                for i, s in enumerate(servers)
            ]
            killer = day_faults.RoleKiller(victims)
            next_note = start + 60
            while time.time() < start + seconds:
                if killer.due(start, time.time()):
                    killer.kill_one()
                if time.time() >= next_note:
                    write(
                        f"  {(time.time() - start) / 60:.0f} min: load average"
                        f" {os.getloadavg()[0]:.1f}, {len(killer.kills)} role kills,"
                        f" {len(patroni.faults)} Patroni faults"
                    )
                    next_note += 60
                ledger.sample()
                time.sleep(0.2)
            end = time.time()
            ledger.sample(force=True)
            cpu = ledger.seconds()
            statements.stopping.set()
            statements.join(timeout=60)
            samples = queue.get(timeout=day_load.TIMEOUT + 120)
            load.join(timeout=30)
            patroni.join(timeout=300)
            write(f"window over; draining the runs due before its end (load {os.getloadavg()})")
            drained = _drain(url, end)
            time.sleep(10)  # the last notifications' deliveries
            if keep:
                _keep_runs(url, run_dir, killer.kills + patroni.faults, start, end)
            sql_floor.stopping.set()
            timer.stopping.set()
            figures = day_report.figures(
                url=url,
                start=start,
                end=end,
                samples=samples,
                lines=read_lines(str(records)),
                arrivals=receiver.arrivals,
                unverified=receiver.unverified,
                sql_floor=sql_floor,
                timer=timer.figures(),
                patroni=patroni.faults,
                patroni_errors=patroni.errors,
                kills=killer.kills,
                seeded=seeded,
                old_history=old_history,
                drained=drained,
                exited=roles.exited() + [s.log_dir for s in servers if s.process.poll()],
                cpu=cpu,
                options={
                    "minutes": minutes,
                    "tasks": tasks,
                    "reads": reads,
                    "writes": writes,
                    "floors": floors,
                },
            )
        figures["machine"] = proc.machine()
        inputs = {
            "cpu": cpu,
            "runs": day_profile.runs_executed(url, start, end),
            "requests": dict(Counter(s[0] for s in samples)),
        }
        day_profile.save(run_dir / "profile.json", statements, **inputs)
        figures["profile"] = day_profile.profile(statements.statements().values(), **inputs)
        emit(figures)
        # The profile first: the printout ends with the figures and their verdict.
        day_profile.print_profile(figures["profile"], write)
        day_report.print_figures(figures, write)
        ok = True
        return figures
    finally:
        for thread in probes:
            if hasattr(thread, "stopping"):
                thread.stopping.set()
        if load is not None and load.is_alive():
            load.kill()
        if roles is not None:
            roles.stop()
        for server in servers:
            server.stop()
        if before is not None:
            _restore_django(before)
        if keep or not ok:
            for log in cluster.root.glob("*.log"):
                shutil.copy(log, run_dir / f"cluster-{log.name}")
        cluster.stop()
        if keep or not ok:
            print(f"bench day: logs in {run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


def _groups(
    cluster: PatroniCluster, servers: list[apiserver.Gunicorn], roles: Roles, load: int | None
) -> Callable[[], dict[str, list[int]]]:
    """Where the two cores go: the pids of each group of processes, looked up when called."""

    def pids() -> dict[str, list[int]]:
        found: dict[str, list[int]] = {
            "API (2 gunicorn)": [p for s in servers for p in (s.process.pid, *s.worker_pids())],
            "PostgreSQL (3 nodes)": [],
            "Patroni and etcd": [cluster.etcd.pid] if cluster.etcd else [],
            "harness (receiver, floors)": [os.getpid()],
            "API load generator": [load] if load else [],
        }
        for member in cluster.members:
            postmaster = member.postmaster_pid()
            if postmaster:
                found["PostgreSQL (3 nodes)"] += [postmaster, *proc.children(postmaster)]
            if member.patroni_pid:
                found["Patroni and etcd"].append(member.patroni_pid)
        for role in roles.slots:
            kind = role.name.rsplit(" ", 1)[0] + "s"
            if role.process is not None:
                found.setdefault(kind, []).append(role.process.pid)
        return found

    return pids


class CpuLedger:
    """CPU seconds of each group, sampled every few seconds, so that a process killed in the
    window keeps what it used until its last sample (a few seconds' worth may be missed)."""

    EVERY = 3.0

    def __init__(self, groups: Callable[[], dict[str, list[int]]]) -> None:
        self.groups, self.next = groups, 0.0
        self.seen: dict[str, dict[int, tuple[float, float]]] = {}  # pid: (first, last)

    def sample(self, *, force: bool = False) -> None:
        if not force and time.monotonic() < self.next:
            return
        self.next = time.monotonic() + self.EVERY
        for group, pids in self.groups().items():
            mine = self.seen.setdefault(group, {})
            for pid in pids:
                used = proc.cpu_seconds(pid)
                if used:
                    first = mine[pid][0] if pid in mine else used
                    mine[pid] = (first, used)

    def seconds(self) -> dict[str, float]:
        return {
            group: round(sum(last - first for first, last in pids.values()), 1)
            for group, pids in self.seen.items()
        }


def _token(username: str, *, lifetime: timedelta) -> str:
    """An access token valid for the whole run (the default expires after 15 minutes)."""
    from rest_framework_simplejwt.tokens import RefreshToken

    access = RefreshToken.for_user(get_user_model().objects.get(username=username)).access_token
    access.set_exp(lifetime=lifetime)
    return str(access)


def _old_history() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM tasks_run WHERE finished_at < now() - %s",
            [timedelta(days=day_seed.RETENTION_DAYS)],
        )
        return cursor.fetchone()[0]


def _keep_runs(
    url: str, run_dir: Path, faults: list[day_faults.Fault], start: float, end: float
) -> None:
    """With `--keep`: every run's times and its task's interval (runs.csv), the window's and the
    faults' (window.json), to find where start lateness comes from after the cluster is gone."""
    query = (
        "COPY (SELECT r.id, r.task_id, r.attempt, r.status, t.schedule->>'every' AS every,"
        " extract(epoch FROM r.created_at) AS created, extract(epoch FROM r.scheduled_at) AS"
        " scheduled, extract(epoch FROM r.started_at) AS started, r.worker"
        " FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id) TO STDOUT WITH CSV HEADER"
    )
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            with conn.cursor().copy(query) as copy, open(run_dir / "runs.csv", "wb") as out:
                for chunk in copy:
                    out.write(chunk)
    except psycopg.Error as exc:
        print(f"bench day: runs not kept ({exc})", file=sys.stderr)
    events = [{"name": f.name, "start": f.start, "end": f.end} for f in faults]
    (run_dir / "window.json").write_text(json.dumps({"start": start, "end": end, "faults": events}))


def _drain(url: str, end: float) -> float:
    """Seconds until no run due before `end` is unfinished (or DRAIN_SECONDS)."""
    started = time.monotonic()
    query = (
        "SELECT count(*) FROM tasks_run WHERE scheduled_at < to_timestamp(%s)"
        " AND status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')"
    )
    while time.monotonic() - started < DRAIN_SECONDS:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                if conn.execute(query, [end]).fetchone()[0] == 0:
                    break
        except psycopg.Error:
            pass
        time.sleep(1.0)
    return round(time.monotonic() - started, 1)
