"""Request body limits: a body that is too large answers 413 as JSON before anything reads it.

`RequestSizeLimitMiddleware` sits early in MIDDLEWARE. It refuses a declared Content-Length over
the limit without reading a byte, and reads a chunked body (no Content-Length) only up to the
limit. Limits: SCHEDULER_MAX_JSON_BYTES for every body except multipart ones, which may carry
the executable and its form fields (SCHEDULER_MAX_UPLOAD_BYTES + SCHEDULER_MAX_JSON_BYTES);
`UploadSizeLimitHandler` (first in FILE_UPLOAD_HANDLERS) stops a single file at
SCHEDULER_MAX_UPLOAD_BYTES while it streams in, and the API's exception handler turns that
into the same 413.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse, JsonResponse

_READ_CHUNK = 64 * 1024


class BodyTooLarge(RequestDataTooBig):
    """A request body (or one uploaded file in it) is over its configured limit."""

    def __init__(self, limit: int, what: str = "The request body") -> None:
        super().__init__(f"{what} is larger than {limit} bytes.")
        self.limit = limit


def too_large_response(exc: RequestDataTooBig) -> JsonResponse:
    """413 in DRF's `{"detail", "code"}` shape (Django's own answer would be an HTML 400)."""
    detail = str(exc) if isinstance(exc, BodyTooLarge) else "The request body is too large."
    return JsonResponse({"detail": detail, "code": "request_too_large"}, status=413)


def body_limit(request: HttpRequest) -> int:
    content_type = request.META.get("CONTENT_TYPE", "").lower()
    if content_type.startswith("multipart/"):
        return settings.SCHEDULER_MAX_UPLOAD_BYTES + settings.SCHEDULER_MAX_JSON_BYTES
    return settings.SCHEDULER_MAX_JSON_BYTES


class RequestSizeLimitMiddleware:
    """413 for a Content-Length over the limit; chunked bodies are buffered up to the limit."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_limit(request)
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django reads such a body as empty too
        if declared > limit:
            return too_large_response(BodyTooLarge(limit))
        if not declared and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            if not request.META.get("wsgi.input_terminated"):
                # The server hands over the raw chunked stream (e.g. runserver): reading it to
                # the end would wait for the client forever.
                return JsonResponse(
                    {
                        "detail": "Send a Content-Length; chunked bodies are not supported here.",
                        "code": "length_required",
                    },
                    status=411,
                )
            try:
                _buffer_chunked_body(request, limit)
            except BodyTooLarge as exc:
                return too_large_response(exc)
        return self.get_response(request)


def _buffer_chunked_body(request: HttpRequest, limit: int) -> None:
    """Read a chunked body (the server has de-chunked it) up to `limit` bytes and hand it to
    Django as an ordinary body with a Content-Length: Django itself reads no body without one."""
    stream = request.META["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read(min(_READ_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
    body = b"".join(chunks)
    request.META["CONTENT_LENGTH"] = str(len(body))
    # LimitedStream is the file-like object Django itself puts there; the stubs say BinaryIO.
    request._stream = LimitedStream(io.BytesIO(body), len(body))  # type: ignore[assignment]


class UploadSizeLimitHandler(FileUploadHandler):
    """Stops a multipart upload as soon as one file passes SCHEDULER_MAX_UPLOAD_BYTES, before
    the rest of it is spooled to disk; the other handlers store what passes."""

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        limit = settings.SCHEDULER_MAX_UPLOAD_BYTES
        if start + len(raw_data) > limit:
            raise BodyTooLarge(limit, what="An uploaded file")
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
