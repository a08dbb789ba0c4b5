"""GET /api/schema/ (scheduler_project/web/schema.py) from a real gthread gunicorn."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import requests


def test_the_first_schema_requests_of_a_new_process_are_all_served(gunicorn) -> None:
    """drf-spectacular loads each extension's target on first use, a step two threads must not
    take at once (one saw another's half-loaded extension: a 500 at start-up)."""
    config = ["-c", "scheduler_project/gunicorn_conf.py"]  # gthread, as deployed
    api = gunicorn(workers=1, args=config, GUNICORN_THREADS="6")

    def fetch(_: int) -> int:
        return requests.get(f"{api}/api/schema/?format=json", timeout=60).status_code

    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(fetch, range(6))) == [200] * 6
