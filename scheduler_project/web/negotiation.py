"""DRF's content negotiation, its answer remembered per (renderers, format, Accept header).

DRF parses the Accept header and matches it against each renderer's media type on every request.
The answer depends on nothing else, and clients
send a handful of distinct headers, so each process negotiates each combination once. Refusals
(406, an unknown `?format=`) are not remembered: they raise every time, as DRF's do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

# (renderer classes, format, Accept header) -> (the chosen renderer's index, media type).
_chosen: dict[tuple[Any, ...], tuple[int, str]] = {}
_CHOSEN_MAX = 1_000  # combinations held at once; the whole cache is dropped past it


class ContentNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, offered: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderers = list(offered)  # DRF passes a list: the same instances, indexable
        format_ = format_suffix or request.query_params.get(self.settings.URL_FORMAT_OVERRIDE)
        accept = request.META.get("HTTP_ACCEPT", "*/*")
        key = (tuple(type(renderer) for renderer in renderers), format_, accept)
        known = _chosen.get(key)
        if known is not None:
            return renderers[known[0]], known[1]
        renderer, media_type = super().select_renderer(request, renderers, format_suffix)
        if len(_chosen) >= _CHOSEN_MAX:
            _chosen.clear()
        _chosen[key] = (next(i for i, r in enumerate(renderers) if r is renderer), media_type)
        return renderer, media_type
