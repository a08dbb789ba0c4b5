"""Request parsers of the task API: DRF's, minus the 500 a deeply nested JSON body causes."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSONParser; a body nested past Python's recursion limit is a 400, not a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None


PARSERS = [JSONParser, parsers.MultiPartParser, parsers.FormParser]
