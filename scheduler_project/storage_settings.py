"""Where uploaded executables are kept: STORAGES from SCHEDULER_STORAGE (docs/operations.md).

`local` (the quick start's): MEDIA_ROOT on this host's disk, so the API and every worker must
share that directory. `s3`: a bucket on any S3-compatible store (AWS, MinIO, Ceph) through
django-storages, configured by its own variables, so API and workers on any number of hosts,
each with its own data directory, read the same objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

STATICFILES = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
LOCAL = {"BACKEND": "django.core.files.storage.FileSystemStorage"}


def storages(kind: str, secret: Callable[[str], str]) -> dict[str, dict]:
    """Django's STORAGES for `kind`; `secret(NAME)` reads NAME or the file NAME_FILE names."""
    if kind == "local":
        return {"default": LOCAL, "staticfiles": STATICFILES}
    if kind != "s3":
        raise ImproperlyConfigured(f"SCHEDULER_STORAGE must be local or s3, not {kind!r}")
    bucket = os.environ.get("AWS_STORAGE_BUCKET_NAME", "")
    if not bucket:
        raise ImproperlyConfigured("SCHEDULER_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME")
    options = {
        "bucket_name": bucket,
        # Unset: boto3's own chain (environment, instance profile, web identity) finds them.
        "access_key": secret("AWS_ACCESS_KEY_ID") or None,
        "secret_key": secret("AWS_SECRET_ACCESS_KEY") or None,
        "endpoint_url": os.environ.get("AWS_S3_ENDPOINT_URL") or None,
        "region_name": os.environ.get("AWS_S3_REGION_NAME") or None,
        "location": os.environ.get("AWS_LOCATION", ""),
        # Keys are the content's SHA-256 (tasks/storage.py), which skips the write of a key that
        # exists; two identical uploads at once both write the same bytes under the same key.
        "file_overwrite": True,
        "default_acl": None,
        "querystring_auth": True,
    }
    return {
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
        "staticfiles": STATICFILES,
    }
