"""Named SQL statements kept in `.sql` files, read once per process.

A file holds statements one after another, each introduced by a marker line (comment lines
just above a marker describe the statement below it)::

    -- literal: candidates
    -- name: claim
    WITH {claim_ctes} SELECT ... LIMIT {candidates}

Braces have one meaning, resolved by this loader alone:

- `{name}` of another statement of the same file includes it (the claim's CTEs are shared by
  the claim and by the record-and-claim cycle);
- `{name}` declared by a `-- literal: name` line is an integer written into the statement: its
  value is given to `queries(..., name=value)` when it is fixed for the process, else to
  `Statements.render(statement, name=value)` for each variant the caller needs;
- `{{` and `}}` are a literal brace (`'{{}}'` is the empty array `'{}'`);
- any other brace is an error when the file is loaded.

Parameters keep psycopg's `%(name)s` form. An app keeps its statements in its own `sql/`
folder: `queries("notifications", "delivery.sql")` reads notifications/sql/delivery.sql.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from importlib import resources

_MARKER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_LITERAL = re.compile(r"^--\s*literal:\s*(\w+)\s*$", re.MULTILINE)
# A literal brace, a reference, or a brace that is neither (an error).
_BRACES = re.compile(r"\{\{|\}\}|\{(\w+)\}|[{}]")
# Comment lines just above a marker describe the next statement to the reader; they are not
# sent with the previous one.
_TRAILING_COMMENTS = re.compile(r"(\n\s*--[^\n]*)+\s*$")


@functools.cache
def queries(app: str, filename: str, **literals: int) -> Statements:
    """The statements of `<app>/sql/<filename>` by name (read-only, cached per process), with
    the fixed `literals` written in."""
    text = (resources.files(app) / "sql" / filename).read_text(encoding="utf-8")
    return Statements(text, literals, source=f"{app}/sql/{filename}")


def parse(text: str, **literals: int) -> dict[str, str]:
    """Every statement of `text` by name, fully resolved (each declared literal given)."""
    statements = Statements(text, literals)
    return {name: statements[name] for name in statements}


class Statements(Mapping[str, str]):
    """A file's statements: `self[name]` once every literal it uses is known, else
    `render(name, literal=value)`."""

    def __init__(self, text: str, literals: Mapping[str, int], *, source: str = "<text>") -> None:
        self.source = source
        self.declared = frozenset(_LITERAL.findall(text))
        for name, value in literals.items():
            if name not in self.declared:
                raise ValueError(f"{source}: literal {name!r} is not declared (-- literal:)")
            _check_value(name, value)
        self.fixed = dict(literals)
        parts = _MARKER.split(text)
        raw: dict[str, str] = {}
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in raw:
                raise ValueError(f"{source}: statement {name!r} is defined twice")
            if name in self.declared:
                raise ValueError(f"{source}: {name!r} is both a statement and a literal")
            raw[name] = _TRAILING_COMMENTS.sub("", body).strip()
        # Includes resolved, literals and escapes still as written.
        self._included: dict[str, str] = {}

        def include(name: str, seen: tuple[str, ...]) -> str:
            if name in seen:
                raise ValueError(f"{source}: statement {name!r} includes itself")
            if name not in self._included:
                self._included[name] = _BRACES.sub(
                    lambda m: include(m[1], (*seen, name)) if m[1] in raw else m[0], raw[name]
                )
            return self._included[name]

        for name in raw:
            include(name, ())
        # What each statement still needs: the literals it uses that were not given here.
        self._needs: dict[str, frozenset[str]] = {}
        for name, sql in self._included.items():
            used = set()
            for match in _BRACES.finditer(sql):
                token, ref = match[0], match[1]
                if token in ("{{", "}}"):
                    continue
                if ref is None:
                    line = sql.count("\n", 0, match.start()) + 1
                    raise ValueError(
                        f"{source}: statement {name!r}, line {line}: a lone "
                        f"{token!r}; write {token * 2!r} for a literal brace"
                    )
                if ref not in self.declared:
                    raise ValueError(
                        f"{source}: statement {name!r} refers to {{{ref}}}, which "
                        "is neither a statement nor a declared literal"
                    )
                used.add(ref)
            self._needs[name] = frozenset(used - self.fixed.keys())
        self._rendered: dict[tuple[str, tuple[tuple[str, int], ...]], str] = {}

    def __getitem__(self, name: str) -> str:
        needs = self._needs[name]
        if needs:
            # Not KeyError: the statement exists (`in` and `get` must not say otherwise).
            raise ValueError(
                f"{self.source}: statement {name!r} needs the literal(s) "
                f"{', '.join(sorted(needs))}: use render()"
            )
        return self.render(name)

    def __contains__(self, name: object) -> bool:
        return name in self._included

    def __iter__(self) -> Iterator[str]:
        return iter(self._included)

    def __len__(self) -> int:
        return len(self._included)

    def needs(self, name: str) -> frozenset[str]:
        """The literals `render(name, ...)` must be given."""
        return self._needs[name]

    def render(self, name: str, **literals: int) -> str:
        """Statement `name` with `literals` (those it needs beyond the fixed ones) written in."""
        key = (name, tuple(sorted(literals.items())))
        if key in self._rendered:
            return self._rendered[key]
        needs = self._needs[name]
        if set(literals) != needs:
            raise ValueError(
                f"{self.source}: statement {name!r} takes the literal(s) "
                f"{sorted(needs)}, was given {sorted(literals)}"
            )
        for literal, value in literals.items():
            _check_value(literal, value)
        values = {**self.fixed, **literals}

        def substitute(match: re.Match[str]) -> str:
            if match[0] in ("{{", "}}"):
                return match[0][0]
            return str(values[match[1]])

        sql = _BRACES.sub(substitute, self._included[name])
        self._rendered[key] = sql
        return sql


def _check_value(name: str, value: object) -> None:
    # Only integers are written into SQL: nothing a caller passes can change its meaning.
    if type(value) is not int:
        raise TypeError(f"literal {name!r} must be an int, not {type(value).__name__}")
