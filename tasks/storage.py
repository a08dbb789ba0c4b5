"""Uploaded executables in Django's default storage: MEDIA_ROOT, or an S3 bucket every host shares.

An executable's key is the SHA-256 of its bytes (`executables/<sha256>`), so a key never names
other bytes and identical uploads share one object (written once: an upload whose key exists is
not written again). The name the user uploaded is the task's `executable_name`. A worker on
another host keeps what it fetched in its own data directory under that hash and fetches each
executable once, however many runs use it. Keys of older uploads
(`executables/<sha256>/<file name>`) are read the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import models
from django.db.models.fields.files import FieldFile

_HASHED = re.compile(r"^executables/([0-9a-f]{64})(?:/|$)")
NAME_MAX_LENGTH = 255
STALE_FETCH_SECONDS = 3600  # a fetch still being written after an hour was abandoned


class HashedFieldFile(FieldFile):
    def save(self, name: str, content: File, save: bool = True) -> None:
        # Uploads are capped (SCHEDULER_MAX_UPLOAD_BYTES): reading one more time is cheap.
        digest = hashlib.sha256()
        for chunk in content.chunks():
            digest.update(chunk)
        # The model's field for the name as uploaded (Task.executable_name).
        setattr(self.instance, f"{self.field.attname}_name", _display_name(name))
        key = self.field.generate_filename(self.instance, digest.hexdigest())
        if not self.storage.exists(key):
            super().save(digest.hexdigest(), content, save)
            return
        # The same bytes are stored already: point at them instead of writing a copy (local
        # storage would write one under an invented name, S3 would write the same bytes again).
        self.name = key
        setattr(self.instance, self.field.attname, self.name)
        self._committed = True
        if save:
            self.instance.save()


def _display_name(name: str) -> str:
    base = posixpath.basename(name.replace("\\", "/")) or "executable"
    return base[-NAME_MAX_LENGTH:]


class ExecutableField(models.FileField):
    """A FileField whose key is `executables/<sha256 of the bytes>`; the model has a CharField
    `<field>_name` for the name the file was uploaded as."""

    attr_class = HashedFieldFile

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["upload_to"] = "executables/"
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("upload_to", None)
        return name, path, args, kwargs


def payload_s3_path(name: str | None) -> str | None:
    """`s3://bucket/key` of a stored executable; None without one or on local storage."""
    bucket = getattr(default_storage, "bucket_name", None)
    if not name or not bucket:
        return None
    location = (getattr(default_storage, "location", "") or "").strip("/")
    return f"s3://{bucket}/{location + '/' if location else ''}{name}"


@contextlib.contextmanager
def local_executable(name: str) -> Iterator[Path]:
    """A path on this host holding the executable stored as `name`, for the run's duration
    (the sandbox copies it into the run's own directory before starting it)."""
    try:
        path = default_storage.path(name)  # local storage: the file itself
    except NotImplementedError:
        path = None
    if path is not None:
        yield Path(path)
        return
    workdir = Path(tempfile.mkdtemp(prefix="scheduler-exe-"))
    try:
        local = workdir / "payload"
        match = _HASHED.match(name)
        if match:
            # A hard link: evicting the cache entry while the run starts cannot remove it.
            os.link(_cached(name, match.group(1)), local)
        else:  # stored before keys were hashed: fetched for this run only
            with default_storage.open(name, "rb") as src, local.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        yield local
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def cache_dir() -> Path:
    return Path(settings.TASKS_EXECUTABLE_CACHE_DIR)


def _cached(name: str, sha256: str) -> Path:
    """The cache entry for `sha256`, fetched from storage and checked against it if missing."""
    directory = cache_dir()
    entry = directory / sha256
    if entry.exists():
        os.utime(entry)  # eviction removes the least recently used first
        return entry
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    # Written under a private name and renamed: a concurrent run never sees half a file.
    fd, partial = tempfile.mkstemp(dir=directory, prefix=".fetch-")
    try:
        with default_storage.open(name, "rb") as src, os.fdopen(fd, "wb") as dst:
            for chunk in iter(lambda: src.read(2**20), b""):
                digest.update(chunk)
                dst.write(chunk)
        if digest.hexdigest() != sha256:
            raise OSError(f"{name}: the stored bytes do not match the SHA-256 in their key")
        os.replace(partial, entry)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
    _evict(directory, keep=entry)
    return entry


def _evict(directory: Path, *, keep: Path) -> None:
    """Remove the least recently used entries while the cache is over its size, and fetches
    that a killed worker left half written."""
    entries = []
    for path in directory.iterdir():
        with contextlib.suppress(FileNotFoundError):
            stat = path.stat()
            if path.name.startswith(".fetch-"):
                if time.time() - stat.st_mtime > STALE_FETCH_SECONDS:
                    path.unlink()
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= settings.TASKS_EXECUTABLE_CACHE_BYTES:
            break
        if path != keep:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            total -= size


def sha256_of(name: str) -> str:
    """The SHA-256 of the executable stored as `name`: from its key, or (stored before keys
    were hashed) from its bytes."""
    match = _HASHED.match(name)
    if match:
        return match.group(1)
    digest = hashlib.sha256()
    with default_storage.open(name, "rb") as src:
        for chunk in iter(lambda: src.read(2**20), b""):
            digest.update(chunk)
    return digest.hexdigest()
