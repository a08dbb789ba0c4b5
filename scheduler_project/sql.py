"""Named SQL statements kept in `.sql` files, read once per process.

A file holds statements one after another, each introduced by a marker line (comment lines
just above a marker describe the statement below it)::

    -- name: claim
    WITH {claim_ctes} SELECT ...

A statement may include another one of the same file by writing its name in braces (the
claim's CTEs are shared by the claim and by the record-and-claim cycle); braces around anything
else (`'{}'` literals, the claim's `{candidates}`) are left as they are. Parameters keep
psycopg's `%(name)s` form. An app keeps its statements in its own `sql/` folder:
`queries("notifications", "delivery.sql")` reads notifications/sql/delivery.sql.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

_MARKER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{(\w+)\}")
# Comment lines just above a marker describe the next statement to the reader; they are not
# sent with the previous one.
_TRAILING_COMMENTS = re.compile(r"(\n\s*--[^\n]*)+\s*$")


@functools.cache
def queries(app: str, filename: str) -> Mapping[str, str]:
    """The statements of `<app>/sql/<filename>` by name (read-only, cached per process)."""
    text = (resources.files(app) / "sql" / filename).read_text(encoding="utf-8")
    return MappingProxyType(parse(text))


def parse(text: str) -> dict[str, str]:
    """Split `text` at its `-- name:` markers and resolve includes; text before the first
    marker is a comment about the file and is dropped."""
    parts = _MARKER.split(text)
    raw: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in raw:
            raise ValueError(f"statement {name!r} is defined twice")
        raw[name] = _TRAILING_COMMENTS.sub("", body).strip()
    resolved: dict[str, str] = {}

    def resolve(name: str, seen: tuple[str, ...]) -> str:
        if name in seen:
            raise ValueError(f"statement {name!r} includes itself")
        if name not in resolved:
            resolved[name] = _INCLUDE.sub(
                lambda m: resolve(m[1], (*seen, name)) if m[1] in raw else m[0], raw[name]
            )
        return resolved[name]

    return {name: resolve(name, ()) for name in raw}
