"""Where the URL and the credentials come from: flags, then the environment (`SCHEDULER_URL`;
`SCHEDCTL_TOKEN`, a service account's token for CI, or `SCHEDULER_TOKEN`), then the config file
`login` writes (`$XDG_CONFIG_HOME/schedctl/config.json`, mode 0600, holding the URL and a
refresh token)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import typer

APP = "schedctl"
DEFAULT_URL = "http://127.0.0.1:8000"


def config_path() -> Path:
    return Path(typer.get_app_dir(APP)) / "config.json"


def read_config() -> dict[str, str]:
    try:
        return json.loads(config_path().read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise ConfigError(f"{config_path()}: not JSON ({exc})") from None


def write_config(values: dict[str, str]) -> Path:
    """Write the config file readable by its owner alone (it holds a refresh token)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(values, handle, indent=2)
    os.chmod(path, 0o600)  # an older file keeps its mode through O_CREAT
    return path


class ConfigError(Exception):
    pass


@dataclass
class Settings:
    url: str
    token: str | None  # an access token (flag, SCHEDCTL_TOKEN or SCHEDULER_TOKEN)
    refresh: str | None  # the refresh token `login` stored


def resolve(url: str | None, token: str | None) -> Settings:
    stored = read_config()
    chosen_url = url or os.environ.get("SCHEDULER_URL") or stored.get("url") or DEFAULT_URL
    chosen_token = (
        token or os.environ.get("SCHEDCTL_TOKEN") or os.environ.get("SCHEDULER_TOKEN") or None
    )
    return Settings(chosen_url.rstrip("/"), chosen_token, stored.get("refresh"))
