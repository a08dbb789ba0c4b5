"""Named SQL statements kept in `.sql` files, read once per process.

A file holds statements one after another, each introduced by a marker line. The comment lines
just above a marker describe the statement below it (at least one line each, procrastinate's
`queries.sql` style: `description(name)`, held by tests/scheduler_project/test_sql.py)::

    -- literal: candidates
    -- The due runs a worker may take, highest priority first.
    -- name: claim
    WITH {claim_ctes} SELECT ... LIMIT {candidates}

Braces have one meaning, resolved by this loader alone:

- `{name}` of another statement of the same file includes it (the claim's CTEs are shared by
  the claim and by the record-and-claim cycle); a fragment declared with parameters
  (`-- name: iso_time(at)`, its body using `{at}`) is included with arguments,
  `{iso_time(r.started_at)}`: expressions without commas or braces, written in for `{at}`;
- `{name}` declared by a `-- literal: name` line is an integer written into the statement: its
  value is given to `queries(..., name=value)` when it is fixed for the process, else to
  `Statements.render(statement, name=value)` for each variant the caller needs;
- `{name}` declared by a `-- query: name` line is a query Django's ORM compiled (a filtered,
  ordered list), given to `Statements.compose(statement, params, name=(sql, values))`: its `%s`
  placeholders become `%(name_0)s`, ... and their values join `params`;
- `{{` and `}}` are a literal brace (`'{{}}'` is the empty array `'{}'`);
- any other brace is an error when the file is loaded.

Parameters keep psycopg's `%(name)s` form. An app keeps its statements in its own `sql/`
folder: `queries("notifications", "delivery.sql")` reads notifications/sql/delivery.sql.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from typing import Any

# A statement's name, and its parameters when it is a fragment that takes arguments.
_MARKER = re.compile(r"^--\s*name:\s*(\w+)(?:\(\s*(\w+(?:\s*,\s*\w+)*)\s*\))?\s*$", re.MULTILINE)
_LITERAL = re.compile(r"^--\s*literal:\s*(\w+)\s*$", re.MULTILINE)
_QUERY = re.compile(r"^--\s*query:\s*(\w+)\s*$", re.MULTILINE)
_DECLARATION = re.compile(r"^--\s*(literal|query):")
# A literal brace, a reference (with its arguments, if any), or a brace that is neither (an
# error).
_BRACES = re.compile(r"\{\{|\}\}|\{(\w+)(?:\(([^{}]*)\))?\}|[{}]")
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
    `render(name, literal=value)`; `compose(name, ...)` for one that takes queries. Fragments
    that take arguments are not statements (they are only included): `fragments()`."""

    def __init__(self, text: str, literals: Mapping[str, int], *, source: str = "<text>") -> None:
        self.source = source
        self.declared = frozenset(_LITERAL.findall(text))
        self.query_slots = frozenset(_QUERY.findall(text))
        if both := self.declared & self.query_slots:
            raise ValueError(f"{source}: {sorted(both)} declared both a literal and a query")
        for name, value in literals.items():
            if name not in self.declared:
                raise ValueError(f"{source}: literal {name!r} is not declared (-- literal:)")
            _check_value(name, value)
        self.fixed = dict(literals)
        parts = _MARKER.split(text)
        raw: dict[str, str] = {}
        params: dict[str, tuple[str, ...]] = {}
        self._descriptions: dict[str, str] = {}
        before = parts[0]
        for name, declared, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
            if name in raw:
                raise ValueError(f"{source}: statement {name!r} is defined twice")
            if name in self.declared or name in self.query_slots:
                raise ValueError(f"{source}: {name!r} is both a statement and a literal or query")
            self._descriptions[name] = _description(before)
            raw[name] = _TRAILING_COMMENTS.sub("", body).strip()
            params[name] = tuple(p.strip() for p in declared.split(",")) if declared else ()
            before = body
        for name, taken in params.items():
            if clash := set(taken) & (raw.keys() | self.declared | self.query_slots):
                raise ValueError(
                    f"{source}: {name!r}'s parameter(s) {sorted(clash)} are also named "
                    "as a statement, literal or query"
                )
        self._params = params
        # Includes resolved, literals and escapes still as written.
        self._included: dict[str, str] = {}

        def include(name: str, seen: tuple[str, ...]) -> str:
            if name in seen:
                raise ValueError(f"{source}: statement {name!r} includes itself")
            if name not in self._included:
                self._included[name] = _BRACES.sub(lambda m: reference(m, (*seen, name)), raw[name])
            return self._included[name]

        def reference(match: re.Match[str], seen: tuple[str, ...]) -> str:
            ref, args = match[1], match[2]
            if ref not in raw:
                return match[0]
            taken = params[ref]
            given = () if args is None else tuple(a.strip() for a in args.split(","))
            if len(given) != len(taken) or "" in given:
                raise ValueError(
                    f"{source}: statement {seen[-1]!r} includes {ref!r} with "
                    f"{len(given)} argument(s); it takes {len(taken)} ({', '.join(taken)})"
                )
            body = include(ref, seen)
            if not taken:
                return body
            values = dict(zip(taken, given, strict=True))
            return _BRACES.sub(
                lambda m: values[m[1]] if m[1] in values and m[2] is None else m[0], body
            )

        for name in raw:
            include(name, ())
        # What each statement still needs: the literals and queries it uses that were not given.
        self._needs: dict[str, frozenset[str]] = {}
        for name, sql in self._included.items():
            used = set()
            for match in _BRACES.finditer(sql):
                token, ref = match[0], match[1]
                if token in ("{{", "}}") or (ref in params[name] and match[2] is None):
                    continue
                if ref is None:
                    line = sql.count("\n", 0, match.start()) + 1
                    raise ValueError(
                        f"{source}: statement {name!r}, line {line}: a lone "
                        f"{token!r}; write {token * 2!r} for a literal brace"
                    )
                if match[2] is not None or (
                    ref not in self.declared and ref not in self.query_slots
                ):
                    raise ValueError(
                        f"{source}: statement {name!r} refers to {token}, which "
                        "is neither a statement nor a declared literal or query"
                    )
                used.add(ref)
            self._needs[name] = frozenset(used - self.fixed.keys())
        self._rendered: dict[tuple[str, tuple[tuple[str, int], ...]], str] = {}
        self._slotted: dict[str, list[str]] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self:
            raise KeyError(name)
        needs = self._needs[name]
        if needs:
            # Not KeyError: the statement exists (`in` and `get` must not say otherwise).
            raise ValueError(
                f"{self.source}: statement {name!r} needs the literal(s) or query(ies) "
                f"{', '.join(sorted(needs))}: use render() or compose()"
            )
        return self.render(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._included and not self._params[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._included if not self._params[name])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def fragments(self) -> tuple[str, ...]:
        """The fragments that take arguments."""
        return tuple(name for name in self._included if self._params[name])

    def needs(self, name: str) -> frozenset[str]:
        """The literals `render(name, ...)` (or queries `compose(name, ...)`) must be given."""
        return self._needs[name]

    def parameters(self, name: str) -> tuple[str, ...]:
        """The parameters of fragment `name` (none for a statement)."""
        return self._params[name]

    def description(self, name: str) -> str:
        """The comment lines just above statement `name`'s marker, as one line ("" if none)."""
        return self._descriptions[name]

    def render(self, name: str, **literals: int) -> str:
        """Statement `name` with `literals` (those it needs beyond the fixed ones) written in."""
        key = (name, tuple(sorted(literals.items())))
        if key in self._rendered:
            return self._rendered[key]
        needs = self._needs[name]
        if set(literals) != needs or self._params[name]:
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

    def compose(
        self, name: str, params: dict[str, Any], **queries: tuple[str, Sequence[Any]]
    ) -> str:
        """Statement `name` with each query it declares written in: `(sql, values)` as Django's
        compiler gives them (`queryset.query.sql_with_params()`). A query's `%s` placeholders
        become `%(query_0)s`, `%(query_1)s`, ... and its values are put in `params` by those
        names, beside the statement's own."""
        if name not in self:
            raise KeyError(name)
        if set(queries) != self._needs[name] or not self._needs[name] <= self.query_slots:
            raise ValueError(
                f"{self.source}: statement {name!r} takes the query(ies) "
                f"{sorted(self._needs[name])}, was given {sorted(queries)}"
            )
        if name not in self._slotted:
            # The statement's text between its queries, literals and escapes written in.
            pieces, last = [], 0
            text = self._included[name]
            for match in _BRACES.finditer(text):
                if match[1] in self.query_slots:
                    pieces += [_unescape(text[last : match.start()], self.fixed), match[1]]
                    last = match.end()
            self._slotted[name] = [*pieces, _unescape(text[last:], self.fixed)]
        slotted = self._slotted[name]
        written = [slotted[0]]
        for slot, text in zip(slotted[1::2], slotted[2::2], strict=True):
            written += [_named_placeholders(slot, *queries[slot], params), text]
        return "".join(written)


def _description(before: str) -> str:
    """The comment lines that end `before` (the text above a marker), without a blank line or a
    declaration between them and the marker."""
    lines: list[str] = []
    for line in reversed(before.split("\n")[:-1]):  # the last is the marker's line, empty
        stripped = line.strip()
        if not stripped.startswith("--") or _DECLARATION.match(stripped):
            break
        lines.append(stripped.removeprefix("--").strip())
    return " ".join(reversed(lines)).strip()


def _unescape(text: str, fixed: Mapping[str, int]) -> str:
    return _BRACES.sub(lambda m: m[0][0] if m[0] in ("{{", "}}") else str(fixed[m[1]]), text)


def _named_placeholders(
    prefix: str, sql: str, values: Sequence[Any], params: dict[str, Any]
) -> str:
    """`sql`'s `%s` placeholders (Django's) as `%(prefix_0)s`, ..., their values put in
    `params`."""
    parts = sql.split("%s")
    if len(parts) != len(values) + 1 or "%%" in sql or "%(" in sql:
        raise ValueError(f"unexpected placeholders in the query {prefix!r}")
    named = [parts[0]]
    for i, (value, part) in enumerate(zip(values, parts[1:], strict=True)):
        key = f"{prefix}_{i}"
        params[key] = value
        named += ["%(", key, ")s", part]
    return "".join(named)


def _check_value(name: str, value: object) -> None:
    # Only integers are written into SQL as literals: nothing a caller passes can change its
    # meaning.
    if type(value) is not int:
        raise TypeError(f"literal {name!r} must be an int, not {type(value).__name__}")
