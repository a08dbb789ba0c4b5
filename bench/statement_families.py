"""Which part of the product a statement seen by `pg_stat_statements` belongs to, for the profile
of `bench day` (bench/day_profile.py).

A statement the product sends from a named SQL file (scheduler_project/sql.py) is recognised by
its text: every named statement of every app's `sql/` folder is turned into a pattern (comments,
parameters and constants taken out, `{query}` slots matching anything), and a statement as
`pg_stat_statements` shows it (constants as `$n`) is compared with each. `NAMED` gives the family
of each file's statements (a file's name alone, or `file:statement`). What Django's ORM writes
has no name: `RULES` recognise it by its text, first match wins. Everything else is "other".
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from scheduler_project.sql import Statements

APPS = ("tasks", "notifications", "reviewers")
SLOT = "zzslotzz"  # written for a `{query}` slot, then made a wildcard
_TYPE = "double precision|timestamp with time zone|character varying|[a-z_0-9]+"

# The family of a named statement: `app/file:statement` first, then `app/file`.
NAMED = {
    "tasks/claim.sql:renew_heartbeats": "worker: heartbeats",
    "tasks/claim.sql": "worker: claim cycle",
    "tasks/complete.sql": "worker: claim cycle",
    "tasks/overlap.sql": "worker: claim cycle",
    "tasks/processes.sql": "process beats",
    "tasks/plan.sql": "planning",
    "tasks/backfill.sql": "planning",
    "tasks/limits.sql": "scheduler: admission (keys, rate limits)",
    "tasks/no_sandbox.sql": "scheduler: admission (keys, rate limits)",
    "tasks/rescue.sql:rescue": "reviewer: rescue",
    "tasks/rescue.sql:flag_starved": "reviewer: flag starved",
    "tasks/rescue.sql:mark_unplaceable": "reviewer: unplaceable",
    "tasks/expect.sql": "reviewer: expectations",
    "tasks/zombie.sql": "reviewer: zombies",
    "tasks/workflows.sql": "reviewer: workflows",
    "reviewers/samples.sql": "reviewer: queue samples",
    "tasks/counters.sql": "counters",
    "tasks/outbox.sql": "notifications",
    "notifications/delivery.sql": "notifications",
    "tasks/api_json.sql:tasks_page": "API: task list",
    "tasks/api_json.sql:tasks_visible_page": "API: task list",
    "tasks/api_json.sql:tasks_by_ids": "API: task detail",
    "tasks/api_json.sql:runs_page": "API: task runs",
    "tasks/api_json.sql:runs_by_ids": "API: run detail",
    "tasks/api_json.sql": "API: other reads",
    "tasks/audit.sql": "API: create",
}

# What the ORM (or a statement outside the SQL files) writes, by its normalised text (lower
# case, `?` for every value), first match wins.
RULES: tuple[tuple[str, str], ...] = (
    (r'^delete from "tasks_(run|attempt|auditentry|queuesample|process)"', "retention"),
    (
        r'^select "tasks_(run|auditentry)"\."id" as "id" from "tasks_\w+" where\("tasks_\w+"\.',
        "retention",
    ),
    (r'^select \? from only "public"\."\w+" x where', "foreign key checks"),
    (r'"accounts_(membership|serviceaccount)"|from "auth_user"', "API: authentication, teams"),
    (r'^insert into "tasks_task"|^delete from "tasks_taskhealth"', "API: create"),
    (r'^select \? as "a" from "tasks_task" where', "API: task visible"),
    (r"notifications_|pg_notify", "notifications"),
    (r'^insert into "tasks_run"|^update "tasks_task" set "next_unplanned_at"', "planning"),
    (r'^select "tasks_task"\."(id|next_unplanned_at)"|"tasks_workflow"', "planning"),
    (r"bench_day_floor|pg_stat_statements|pg_postmaster_start_time", "harness"),
    (r"^select \?$", "SELECT 1 (the harness's floor, Django's health checks)"),
    (r"^(begin|commit|rollback|set |show |savepoint|release |listen )", "transaction control"),
)


def normalise(sql: str) -> str:
    """`sql` with comments, values and whitespace differences taken out: every parameter
    (`%(name)s`, `%s`, `$1`), string and number becomes `?`, a list of them one `?`, a cast
    after one is dropped, and the text is lower case with single spaces."""
    text = re.sub(r"--[^\n]*", " ", sql)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    text = re.sub(r"'(?:[^']|'')*'", "?", text)
    text = re.sub(r"%\(\w+\)s|%s|\$\d+", "?", text)
    text = re.sub(r"\bextract\(\s*\w+\s+from\b", "extract(? from", text, flags=re.IGNORECASE)
    text = re.sub(r"(?<![\w.\"])-?\d+(?:\.\d+)?(?![\w\"])", "?", text)
    text = re.sub(r"\s+", " ", text).strip().lower()
    text = re.sub(r" ?([(),=<>+*/;\[\]|:-]) ?", r"\1", text)
    # pg_stat_statements shows NULL, TRUE and FALSE as parameters too.
    text = re.sub(r"(?<!\bis )(?<!\bnot )\b(?:null|true|false)\b", "?", text)
    text = re.sub(rf"\?(?:::(?:{_TYPE})(?:\[\])?)+", "?", text)
    text = re.sub(r"\?(?:,\?)+", "?", text)
    return text.rstrip(";")


def _named_texts() -> dict[str, str]:
    """Every named statement of every app's sql/ folder, by `app/file:name`, as sent (every
    literal as 1, each query slot as SLOT)."""
    texts: dict[str, str] = {}
    for app in APPS:
        folder = resources.files(app) / "sql"
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".sql"):
                continue
            text = entry.read_text(encoding="utf-8")
            declared = Statements(text, {}).declared
            statements = Statements(text, dict.fromkeys(declared, 1), source=entry.name)
            for name in statements:
                if slots := statements.needs(name):
                    sql = statements.compose(name, {}, **{s: (SLOT, ()) for s in slots})
                else:
                    sql = statements[name]
                texts[f"{app}/{entry.name}:{name}"] = sql
    return texts


@functools.cache
def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    patterns = []
    for key, sql in _named_texts().items():
        escaped = re.escape(normalise(sql)).replace(SLOT, ".*")
        patterns.append((key, re.compile(escaped)))
    # The longest first: a statement that includes another must win over it.
    return sorted(patterns, key=lambda p: -len(p[1].pattern))


def named(sql: str) -> str | None:
    """The `app/file:name` of the named statement `sql` is, or None."""
    text = normalise(sql)
    for key, pattern in _patterns():
        if pattern.fullmatch(text):
            return key
    return None


def family_of_name(key: str) -> str:
    return NAMED.get(key) or NAMED.get(key.split(":", 1)[0]) or "other (named)"


@functools.cache
def family(sql: str) -> str:
    """The family of statement `sql` (as pg_stat_statements shows it, or as sent)."""
    key = named(sql)
    if key is not None:
        return family_of_name(key)
    text = normalise(sql)
    for pattern, name in RULES:
        if re.search(pattern, text):
            return name
    return "other"
