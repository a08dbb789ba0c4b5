"""The product's settings, with the URLs of bench/floor.py (the floor endpoint of `bench api`)."""

from __future__ import annotations

from scheduler_project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.floor"
