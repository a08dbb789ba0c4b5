"""docker-compose.ha.yml and its Patroni cluster (deploy/ha/patroni/): what every role connects
to, and the Patroni settings, which must stay those the failover tests run
(bench/patroni_cluster.py). No Docker engine runs here: Compose's own `config` checks the
file against the Compose specification (it needs no engine), and the assertions read it as
Compose does (YAML with its anchors and merge keys resolved)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from bench import patroni_cluster
from tests.conftest import ROOT

COMPOSE = ROOT / "docker-compose.ha.yml"
PATRONI = ROOT / "deploy" / "ha" / "patroni"
ROLES = ("migrate", "api", "scheduler", "worker", "reviewer")
NODES = ("pg1", "pg2", "pg3")


def compose_command() -> list[str] | None:
    """The Docker CLI's compose plugin when it works, else Compose 1.29 (Debian's docker-compose,
    which .ci/run installs); None without either."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def compose_config(path: Path) -> subprocess.CompletedProcess:
    command = compose_command()
    if command is None:
        pytest.skip("needs docker compose or docker-compose")
    return subprocess.run(
        [*command, "--project-directory", str(ROOT), "-f", str(path), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compose_accepts_the_file() -> None:
    checked = compose_config(COMPOSE)
    assert checked.returncode == 0, checked.stderr


def test_compose_refuses_a_broken_copy(tmp_path: Path) -> None:
    # The check above could fail: a misspelt key is refused, and named.
    broken = tmp_path / "docker-compose.ha.yml"
    text = COMPOSE.read_text()
    assert "  depends_on: [etcd1, etcd2, etcd3]\n" in text
    broken.write_text(text.replace("  depends_on: [etcd1,", "  depend_on: [etcd1,"))
    checked = compose_config(broken)
    assert checked.returncode != 0
    assert "depend_on" in checked.stderr


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


@pytest.fixture(scope="module")
def patroni() -> dict:
    return yaml.safe_load((PATRONI / "patroni.yml").read_text())


def hosts_and_attrs(url: str) -> tuple[list[str], str]:
    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2].split(",")
    return hosts, parse_qs(parts.query)["target_session_attrs"][0]


def test_three_patroni_nodes_and_three_etcd_members(services: dict) -> None:
    for node in NODES:
        service = services[node]
        assert service["build"] == "./deploy/ha/patroni"
        assert service["environment"]["PATRONI_NAME"] == node
        assert service["environment"]["PATRONI_POSTGRESQL_CONNECT_ADDRESS"] == f"{node}:5432"
        assert service["depends_on"] == ["etcd1", "etcd2", "etcd3"]
    members = {name: services[name]["environment"] for name in ("etcd1", "etcd2", "etcd3")}
    for name, env in members.items():
        assert env["ETCD_NAME"] == name
        assert env["ETCD_ENABLE_V2"] == "true"  # Patroni's `etcd:` speaks the v2 protocol
        assert f"{name}=http://{name}:2380" in env["ETCD_INITIAL_CLUSTER"]


def test_every_role_writes_to_whichever_node_accepts_writes(services: dict) -> None:
    for role in ROLES:
        hosts, attrs = hosts_and_attrs(services[role]["environment"]["DATABASE_URL"])
        assert hosts == [f"{node}:5432" for node in NODES], role
        assert attrs == "read-write", role


def test_the_api_reads_from_a_standby_while_one_answers(services: dict) -> None:
    hosts, attrs = hosts_and_attrs(services["api"]["environment"]["DATABASE_REPLICA_URL"])
    assert hosts == [f"{node}:5432" for node in NODES]
    assert attrs == "prefer-standby"
    # The daemons' queries all go to the primary: none of them gets a replica.
    assert all("DATABASE_REPLICA_URL" not in services[r]["environment"] for r in ROLES[2:])


def test_migrations_wait_for_the_whole_cluster(services: dict) -> None:
    depends = services["migrate"]["depends_on"]
    assert {node: depends[node]["condition"] for node in NODES} == dict.fromkeys(
        NODES, "service_healthy"
    )
    for role in ROLES[1:]:
        assert services[role]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )


def test_patroni_runs_the_settings_the_failover_tests_run(patroni: dict) -> None:
    assert patroni["bootstrap"]["dcs"] == patroni_cluster.dcs_settings()
    assert patroni["scope"] == patroni_cluster.SCOPE
    # etcd's v2 protocol, never etcd3 (docs/operations.md, "Patroni").
    assert "etcd3" not in patroni
    assert patroni["etcd"]["hosts"] == ["etcd1:2379", "etcd2:2379", "etcd3:2379"]


def test_the_image_holds_what_the_config_names(patroni: dict) -> None:
    dockerfile = (PATRONI / "Dockerfile").read_text()
    for package in ("postgresql-15", "patroni", "python3-etcd", "etcd-server"):
        assert f" {package} " in dockerfile.replace("\n", " "), package
    assert patroni["postgresql"]["bin_dir"] == "/usr/lib/postgresql/15/bin"
    script = patroni["bootstrap"]["post_bootstrap"]
    assert f"COPY post-bootstrap.sh {script}" in dockerfile
    assert (PATRONI / "post-bootstrap.sh").stat().st_mode & 0o111
