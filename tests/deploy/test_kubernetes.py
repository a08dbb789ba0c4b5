"""deploy/kubernetes as `kubectl kustomize` builds it, alone (an external PostgreSQL) and with
the cloudnative-pg component: every core object valid against the Kubernetes API's schemas
(strict: no unknown field), and the roles pointed at the services of the CloudNativePG Cluster.
The Cluster itself is a custom resource those schemas do not hold: its fields are checked
here against what the roles rely on."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate
import pytest
import yaml

from tests.conftest import ROOT

BASE = ROOT / "deploy" / "kubernetes"
COMPONENT = BASE / "cloudnative-pg"
WORKLOADS = {
    "scheduler-migrate",
    "scheduler-api",
    "scheduler-scheduler",
    "scheduler-reviewer",
    "scheduler-executor",
}
VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")


def kustomize(directory: Path) -> list[dict]:
    built = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


def with_component(tmp_path: Path) -> list[dict]:
    """An operator's overlay: the base and the component (kustomize takes relative paths)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(BASE, overlay)],
                "components": [os.path.relpath(COMPONENT, overlay)],
            }
        )
    )
    return kustomize(overlay)


def validate_core(objects: list[dict]) -> None:
    for obj in objects:
        if obj["apiVersion"].startswith("postgresql.cnpg.io/"):
            continue
        for version in VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)  # raises when it is not


def containers(objects: list[dict]) -> dict[str, dict]:
    return {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]["containers"][0]
        for obj in objects
        if obj["kind"] in ("Deployment", "Job")
    }


def env(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


def test_the_base_is_valid_and_takes_its_database_from_the_secret() -> None:
    objects = kustomize(BASE)
    validate_core(objects)
    assert not [o for o in objects if o["kind"] == "Cluster"]
    for name, container in containers(objects).items():
        assert "DATABASE_URL" not in env(container), name
        assert {"secretRef": {"name": "scheduler-secrets"}} in container["envFrom"], name


def test_with_cloudnative_pg_every_role_uses_the_clusters_services(tmp_path: Path) -> None:
    objects = with_component(tmp_path)
    validate_core(objects)
    [cluster] = [o for o in objects if o["kind"] == "Cluster"]
    name = cluster["metadata"]["name"]
    initdb = cluster["spec"]["bootstrap"]["initdb"]
    workloads = containers(objects)
    assert set(workloads) == WORKLOADS
    for workload, container in workloads.items():
        variables = env(container)
        password = variables["PGPASSWORD"]["valueFrom"]["secretKeyRef"]
        assert password == {"name": f"{name}-app", "key": "password"}, workload
        url = urlsplit(variables["DATABASE_URL"]["value"])
        assert url.netloc == f"{initdb['owner']}@{name}-rw:5432", workload
        assert url.path == f"/{initdb['database']}", workload
        assert parse_qs(url.query)["target_session_attrs"] == ["read-write"], workload
        assert ("DATABASE_REPLICA_URL" in variables) == (workload == "scheduler-api")
    replica = urlsplit(env(workloads["scheduler-api"])["DATABASE_REPLICA_URL"]["value"])
    assert replica.netloc == f"{initdb['owner']}@{name}-ro:5432,{name}-rw:5432"
    assert parse_qs(replica.query)["target_session_attrs"] == ["prefer-standby"]
    # The base's own variables stay (the patch adds, it does not replace).
    assert "PROMETHEUS_MULTIPROC_DIR" in env(workloads["scheduler-api"])


def test_the_cluster_is_three_instances_with_a_synchronous_standby(tmp_path: Path) -> None:
    [cluster] = [o for o in with_component(tmp_path) if o["kind"] == "Cluster"]
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    assert cluster["metadata"]["namespace"] == "scheduler"
    spec = cluster["spec"]
    assert spec["instances"] == 3
    assert spec["postgresql"]["synchronous"] == {
        "method": "any",
        "number": 1,
        "dataDurability": "required",
    }
    assert spec["affinity"]["podAntiAffinityType"] == "required"


def test_an_invalid_object_is_refused(tmp_path: Path) -> None:
    # The validation above could fail: an unknown field in a patched Deployment is refused.
    objects = with_component(tmp_path)
    api = next(
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "scheduler-api"
    )
    api["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretRef"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_core([api])
