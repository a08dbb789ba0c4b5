"""Executables in object storage, against moto's S3 server on 127.0.0.1.

The API streams an upload to the bucket and keeps no copy; a worker with its own data directory
fetches it (once per content hash) and runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile
from moto.server import ThreadedMotoServer
from rest_framework.test import APIClient

from scheduler_project.storage_settings import storages
from tasks.models import Run, Task
from tasks.storage import cache_dir, local_executable
from tests.conftest import free_port, process_env, wait_for, wait_for_api
from tests.factories import UserFactory

BUCKET = "scheduler-test"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    """moto's standalone S3 server on a free loopback port, with an empty bucket."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    bucket(endpoint).create()
    yield endpoint
    server.stop()


def bucket(endpoint: str):
    s3 = boto3.resource(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return s3.Bucket(BUCKET)


def s3_env(endpoint: str) -> dict[str, str]:
    return {
        "SCHEDULER_STORAGE": "s3",
        "AWS_STORAGE_BUCKET_NAME": BUCKET,
        "AWS_S3_ENDPOINT_URL": endpoint,
        "AWS_S3_REGION_NAME": "us-east-1",
        **CREDENTIALS,
    }


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.fixture
def s3_storage(s3_endpoint, settings, monkeypatch, tmp_path) -> str:
    """This process's default storage on the moto bucket, its data directory in tmp_path."""
    for name, value in s3_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    settings.STORAGES = storages("s3", os.environ.get)
    settings.TASKS_EXECUTABLE_CACHE_DIR = tmp_path / "cache"
    return s3_endpoint


def test_upload_goes_to_the_bucket_keyed_by_its_hash(api: APIClient, s3_storage):
    s3_endpoint = s3_storage
    content = b"#!/bin/sh\necho stored\n"
    sha = hashlib.sha256(content).hexdigest()

    response = api.post(
        "/task",
        {"file": SimpleUploadedFile("job.sh", content), "schedule": "", "delay": "60"},
        format="multipart",
    )

    assert response.status_code == 201, response.content
    key = f"executables/{sha}"
    assert response.json()["payload_s3_path"] == f"s3://{BUCKET}/{key}"
    assert response.json()["executable"] == "job.sh"
    assert Task.objects.get().executable.name == key
    assert bucket(s3_endpoint).Object(key).get()["Body"].read() == content


def test_local_storage_shows_no_s3_path(api: APIClient, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    content = b"#!/bin/sh\necho local\n"

    response = api.post(
        "/task", {"file": SimpleUploadedFile("job.sh", content)}, format="multipart"
    )

    assert response.status_code == 201, response.content
    assert response.json()["payload_s3_path"] is None
    sha = hashlib.sha256(content).hexdigest()
    assert (tmp_path / "media" / "executables" / sha).read_bytes() == content
    assert response.json()["executable"] == "job.sh"


def test_identical_uploads_share_one_object_under_the_names_uploaded(
    api: APIClient, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    content = b"#!/bin/sh\necho shared\n"
    sha = hashlib.sha256(content).hexdigest()

    def upload(name: str) -> dict:
        response = api.post(
            "/task", {"file": SimpleUploadedFile(name, content)}, format="multipart"
        )
        assert response.status_code == 201, response.content
        return response.json()

    first = upload("job.sh")
    stored = tmp_path / "media" / "executables" / sha
    os.utime(stored, (1_000_000, 1_000_000))  # a write would move it
    names = [first["executable"], upload("job.sh")["executable"], upload("other.sh")["executable"]]

    assert names == ["job.sh", "job.sh", "other.sh"]
    assert files_under(tmp_path / "media") == [stored]
    assert stored.stat().st_mtime == 1_000_000
    assert {t.executable.name for t in Task.objects.all()} == {f"executables/{sha}"}
    fetched = api.get(f"/api/v1/tasks/{first['id']}").json()
    assert fetched["executable"] == "job.sh"


def test_an_identical_upload_is_not_written_to_the_bucket_again(api: APIClient, s3_storage):
    content = b"#!/bin/sh\necho once\n"
    key = f"executables/{hashlib.sha256(content).hexdigest()}"
    # Stored already, marked: writing the key again would replace the object and drop the mark.
    bucket(s3_storage).put_object(Key=key, Body=content, Metadata={"first": "yes"})
    before = {o.key for o in bucket(s3_storage).objects.all()}  # moto's state is per process

    response = api.post(
        "/task", {"file": SimpleUploadedFile("again.sh", content)}, format="multipart"
    )

    assert response.status_code == 201, response.content
    assert response.json()["executable"] == "again.sh"
    assert {o.key for o in bucket(s3_storage).objects.all()} == before
    assert bucket(s3_storage).Object(key).metadata == {"first": "yes"}


@pytest.mark.processes
def test_api_and_worker_on_separate_data_directories_share_the_bucket(
    processes, s3_endpoint, tmp_path
):
    UserFactory(username="s3user")
    api_dir, worker_dir = tmp_path / "api-host", tmp_path / "worker-host"
    (api_dir / "tmp").mkdir(parents=True)
    worker_dir.mkdir()
    port = free_port()
    common = s3_env(s3_endpoint) | {"SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY": "true"}
    # TMPDIR too: an upload over 2 MiB is spooled to a temporary file, which must not remain.
    api_env = process_env(
        **common,
        SCHEDULER_DATA_DIR=str(api_dir),
        TMPDIR=str(api_dir / "tmp"),
        ALLOWED_HOSTS="127.0.0.1",
    )
    processes.start("runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}", env=api_env)
    processes.start(
        "runworker",
        "--concurrency",
        "2",
        env=process_env(**common, SCHEDULER_DATA_DIR=str(worker_dir)),
    )
    base = wait_for_api(f"http://127.0.0.1:{port}", details=processes.logs)
    token = requests.post(
        f"{base}/api/v1/auth/token",
        json={"username": "s3user", "password": "password-123"},
        timeout=5,
    ).json()["access"]
    headers = {"Authorization": f"Bearer {token}"}
    # 3 MiB: past Django's in-memory limit, so the API spools it to disk on the way to S3.
    content = b"#!/bin/sh\necho ran on the worker: $1\n" + b"#" * (3 * 2**20) + b"\n"
    sha = hashlib.sha256(content).hexdigest()

    def upload(arg: str) -> dict:
        response = requests.post(
            f"{base}/task",
            data={"payload": json.dumps({"args": [arg]})},
            files={"file": ("job.sh", content)},
            headers=headers,
            timeout=30,
        )
        assert response.status_code == 201, response.text
        return response.json()

    def finished(task_id: str) -> Run | None:
        return Run.objects.filter(task_id=task_id, status__in=["succeeded", "failed"]).first()

    first = upload("one")
    run = wait_for(lambda: finished(first["id"]), timeout=60, interval=0.3, details=processes.logs)

    assert run.status == "succeeded", (run.error, processes.logs())
    assert run.output.startswith("ran on the worker: one")
    key = f"executables/{sha}"
    assert first["payload_s3_path"] == f"s3://{BUCKET}/{key}"
    assert bucket(s3_endpoint).Object(key).content_length == len(content)
    assert files_under(api_dir) == [], "no copy of the upload is left on the API host"
    cached = worker_dir / "cache" / "executables" / sha
    assert cached.read_bytes() == content
    # The same bytes again: the worker runs its cached copy (fetching would not change it).
    second = upload("two")
    run = wait_for(lambda: finished(second["id"]), timeout=60, interval=0.3, details=processes.logs)
    assert run.status == "succeeded" and run.output.startswith("ran on the worker: two")
    assert [p.name for p in files_under(worker_dir / "cache")] == [sha]


def stored(endpoint: str, content: bytes, *, sha: str | None = None) -> str:
    key = f"executables/{sha or hashlib.sha256(content).hexdigest()}/job.sh"
    bucket(endpoint).put_object(Key=key, Body=content)
    return key


def test_worker_cache_refuses_bytes_that_do_not_match_their_key(s3_storage):
    key = stored(s3_storage, b"tampered", sha=hashlib.sha256(b"original").hexdigest())

    with pytest.raises(OSError, match="do not match"), local_executable(key):
        pass

    assert list(cache_dir().iterdir()) == []


def test_worker_runs_keys_of_either_form(s3_storage):
    content = b"#!/bin/sh\necho either\n"
    sha = hashlib.sha256(content).hexdigest()
    for key in (f"executables/{sha}", f"executables/{sha}/job.sh"):  # now, and before
        bucket(s3_storage).put_object(Key=key, Body=content)

        with local_executable(key) as path:
            assert path.read_bytes() == content

    assert [p.name for p in cache_dir().iterdir()] == [sha]


def test_worker_cache_drops_the_least_recently_used_past_its_size(s3_storage, settings):
    settings.TASKS_EXECUTABLE_CACHE_BYTES = 250
    keys = [stored(s3_storage, bytes([n]) * 100) for n in range(3)]
    for key in keys[:2]:
        with local_executable(key) as path:
            assert path.read_bytes()[:1] in (b"\x00", b"\x01")
    time.sleep(0.01)
    with local_executable(keys[0]):  # used again: now the most recent
        pass
    time.sleep(0.01)

    with local_executable(keys[2]) as path:
        assert path.read_bytes() == b"\x02" * 100

    kept = sorted(p.name for p in cache_dir().iterdir())
    assert kept == sorted(key.split("/")[1] for key in (keys[0], keys[2]))
