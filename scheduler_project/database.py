"""DATABASE_URL (and DATABASE_REPLICA_URL) to Django's DATABASES entry, several hosts included.

libpq fails over by itself when given several hosts: `postgresql://u@h1:5432,h2:5432/db?
target_session_attrs=read-write` connects to whichever host accepts writes. django-environ
keeps such a host list but merges the ports wrongly when only some hosts name one
(`h1,h2:5433` becomes port 5433 for both), and keeps IPv6 brackets libpq does not accept, so the
host part is parsed here; everything else (name, user, password, options) is django-environ's.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

ENGINE = "scheduler_project.postgresql"
# PostgreSQL's plan_cache_mode values. The API uses force_generic_plan (scheduler_project/wsgi.py):
# with `auto` the server planned most of its prepared reads again on every execution
# (`python -m bench plans`: a task read 0.56-0.78 ms, against 0.22-0.25 ms generic). So do the
# workers (runworker): `auto` planned their cycle five times over on each new connection.
PLAN_CACHE_MODES = {"", "auto", "force_generic_plan", "force_custom_plan"}
# Applied unless the URL sets them. libpq's defaults wait for the operating system: a TCP connect
# to a host that died may hang for minutes, and a connection to it is noticed dead only after
# two hours of TCP keepalive silence. With these, a role tries the next host after 5 s and drops
# a silent connection after about 25 s.
CONNECT_DEFAULTS: dict[str, int] = {
    "connect_timeout": 5,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


def split_hosts(netloc: str) -> list[tuple[str, str]]:
    """`user@h1:5432,[::1]:5433,%2Ftmp` → [("h1", "5432"), ("::1", "5433"), ("/tmp", "")]."""
    hosts = []
    for item in netloc.rpartition("@")[2].split(","):
        if item.startswith("["):  # [IPv6]:port
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = item.partition(":")
        hosts.append((unquote(host), port))
    return hosts


def database_config(url: str) -> dict[str, Any]:
    """Django's database settings for a PostgreSQL URL with one host or several."""
    config = environ.Env.db_url_config(url)
    hosts = split_hosts(urlsplit(url).netloc)
    config["HOST"] = ",".join(host for host, _ in hosts)
    ports = [port for _, port in hosts]
    # One entry per host (an empty one means the default port), or none at all.
    config["PORT"] = ",".join(ports) if any(ports) else ""
    config["ENGINE"] = ENGINE
    options = config.setdefault("OPTIONS", {})
    for key, value in CONNECT_DEFAULTS.items():
        options.setdefault(key, value)
    return config


def database_url(settings_dict: dict[str, Any]) -> str:
    """The URL of a DATABASES entry (hosts, ports and target_session_attrs kept), for the role
    processes a command or test starts."""
    hosts = str(settings_dict.get("HOST") or "").split(",")
    ports = str(settings_dict.get("PORT") or "").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    netloc = ",".join(
        (f"[{host}]" if ":" in host else quote(host, safe="")) + (f":{port}" if port else "")
        for host, port in zip(hosts, ports, strict=True)
    )
    auth = quote(settings_dict.get("USER") or "postgres", safe="")
    if settings_dict.get("PASSWORD"):
        auth += ":" + quote(settings_dict["PASSWORD"], safe="")
    url = f"postgres://{auth}@{netloc}/{quote(settings_dict['NAME'], safe='')}"
    attrs = (settings_dict.get("OPTIONS") or {}).get("target_session_attrs")
    return f"{url}?target_session_attrs={attrs}" if attrs else url


def databases(
    url: str,
    replica_url: str,
    *,
    conn_max_age: int,
    application_name: str,
    random_page_cost: float = 0.0,
    plan_cache_mode: str = "",
    prepared_statements: bool = True,
) -> dict[str, dict[str, Any]]:
    """DATABASES: `default` from url, and a `replica` from replica_url when it is set.
    `random_page_cost` (0: the server's) and `plan_cache_mode` (empty: the server's) are set on
    each new connection (scheduler_project/postgresql); `prepared_statements` False keeps
    `tasks.db.prepared_cursor` from preparing (a PgBouncer without prepared-statement support in
    transaction mode)."""
    if plan_cache_mode not in PLAN_CACHE_MODES:
        raise ImproperlyConfigured(
            f"DATABASE_PLAN_CACHE_MODE must be one of {', '.join(sorted(PLAN_CACHE_MODES))} "
            f"or empty, not {plan_cache_mode!r}"
        )
    primary = database_config(url)
    default = {
        **primary,
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": True,
        "RANDOM_PAGE_COST": random_page_cost,
        "PLAN_CACHE_MODE": plan_cache_mode,
        "PREPARED_STATEMENTS": prepared_statements,
        "OPTIONS": {**primary["OPTIONS"], "application_name": application_name},
    }
    if not replica_url:
        return {"default": default}
    replica = database_config(replica_url)
    # The primary's target_session_attrs (read-write) would refuse every standby.
    inherited = {k: v for k, v in default["OPTIONS"].items() if k != "target_session_attrs"}
    return {
        "default": default,
        "replica": {
            **default,
            **replica,
            "OPTIONS": {**inherited, **replica["OPTIONS"]},
            "TEST": {"MIRROR": "default"},
        },
    }
