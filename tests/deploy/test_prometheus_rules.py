"""deploy/prometheus/alerts.yml holds every alert of docs/operations.md's two alert tables, as
the docs write them, and promtool (Prometheus' own checker) accepts it."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT

RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
# A row: name | `expression` [or `expression`] [prose] | for | severity. A row without a
# PromQL expression (the blackbox probe of /health) is the prober's, not a rule here.
ROW = re.compile(
    r"^\| ([^|`]+?) \| `((?:[^`\\]|\\.)+)`(?: or `((?:[^`\\]|\\.)+)`)?.*?\| (\w+) \| (\w+) \|$"
)


def documented() -> dict[str, tuple[str, str, str]]:
    """Alert name -> (expression, for, severity), as docs/operations.md's tables show them."""
    found = {}
    for line in (ROOT / "docs" / "operations.md").read_text().splitlines():
        match = ROW.match(line)
        if match is None:
            continue
        name, first, second, wait, severity = match.groups()
        expression = " or ".join(e for e in (first, second) if e).replace("\\|", "|")
        assert name not in found, f"two alerts named {name!r}"
        found[name] = (expression, wait, severity)
    return found


def in_the_file() -> dict[str, tuple[str, str, str]]:
    found = {}
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            name = rule["annotations"]["summary"]
            found[name] = (rule["expr"], rule["for"], rule["labels"]["severity"])
    return found


def test_the_rules_file_is_the_docs_alerts() -> None:
    docs = documented()
    assert "Workers dying" in docs and "No leader (Patroni)" in docs  # both tables were read
    assert in_the_file() == docs


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_every_rule() -> None:
    checked = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(documented())} rules found" in checked.stdout, checked.stdout
