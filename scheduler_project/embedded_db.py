"""The embedded PostgreSQL (pgserver) used when DATABASE_URL is unset: nothing to install."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

DATABASE_NAME = "scheduler"


def ensure_embedded_database(datadir: Path) -> str:
    """Start (or reuse) the embedded server in `datadir` and return a DATABASE_URL for it.

    The server outlives this process on purpose: every role and the next `make run` share it, and
    its data folder survives restarts. pgserver serialises concurrent starts with a lock file.
    """
    import pgserver

    datadir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(datadir, cleanup_mode=None)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    socket_dir = quote(str(server.get_postmaster_info().socket_dir), safe="")
    return f"postgres://postgres@{socket_dir}/{DATABASE_NAME}"


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
