"""Request parsers of the API: JSON everywhere (settings DEFAULT_PARSER_CLASSES), multipart only
where a file is uploaded (UPLOAD_PARSERS), so the schema declares one body type per operation
and client generators get one model each."""

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


# Creating or changing a task may upload its executable as multipart part `file` (docs/api.md).
UPLOAD_PARSERS = [JSONParser, parsers.MultiPartParser]
