"""Date formats (FORMAT_MODULE_PATH): the admin shows times to the second, in ISO order."""

from __future__ import annotations
