"""Per-user rate limit on writes (POST, PUT, PATCH, DELETE): 429 with `Retry-After`.

Reads are not limited. The rate is SCHEDULER_WRITE_RATE (DRF's "<count>/<second|minute|hour|day>",
empty for no limit), read on every request so tests can lower it. Counts live in Django's cache:
the default local-memory cache counts per API process, so with N gunicorn workers a user may make
up to N times the rate; point CACHES at a shared cache for one exact budget.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle


class WriteRateThrottle(SimpleRateThrottle):
    scope = "write"

    def get_rate(self) -> str | None:
        return settings.SCHEDULER_WRITE_RATE or None

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        user = request.user
        if user is None or not user.is_authenticated:
            # Anonymous writes are the token endpoints only; their guard is the password check
            # (and a limit at the reverse proxy), not a per-user budget.
            return None
        return self.cache_format % {"scope": self.scope, "ident": user.pk}
