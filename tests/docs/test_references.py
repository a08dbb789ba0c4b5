"""The words stay true: no page, comment or test points a reader to a file that is not in the
repository (design notes or contracts kept elsewhere), every `docs/...` page and benchmark
section a text names exists, every file the docs name exists, and no text names a tracker issue
or a development session outside the benchmarks' lab notebook (bench/NOTEBOOK.md), and every
section of the notebook a text names exists. The contract clients rely on is docs/api.md."""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(
    r"shared/|\b(?:API|DESIGN|BENCHMARK|STYLE)\.md\b|\b[Ss]eed [AB]\b"
    r"|(?i:seed documents|\bthe seeds\b|\bseed's\b)"
)
ISSUE = re.compile(r"\bissues? ?#?\d+|\bissue_\d+", re.IGNORECASE)
SESSION = re.compile(r"\bsessions? \d+", re.IGNORECASE)
FORMATTER_OFF = re.compile(r"#\s*fmt:\s*(?:skip|off|on)\b")
DOC_PATH = re.compile(r"\bdocs/[\w-]+\.md\b")
# A path in the repository as the docs name one: `tasks/worker/watch.py`, `deploy/kubernetes/`.
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:tasks|notifications|reviewers|scheduler_project|tests|bench|deploy|docs)/[\w./-]*\w)"
)
BENCHMARK_SECTION = re.compile(r'docs/benchmarks\.md,?\s+"([^"]+)"')
NOTEBOOK_SECTION = re.compile(r'bench/NOTEBOOK\.md,?\s+"([^"]+)"')
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
DIARY = ROOT / "bench" / "NOTEBOOK.md"
SKIP = set(".git .venv var node_modules staticfiles __pycache__ .ruff_cache .mypy_cache".split())
SKIP |= {".pytest_cache", ".hypothesis"}
SUFFIXES = {".md", ".py", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".html", ".sql", ".sh", ".js"}
NAMES = {"Makefile", "Dockerfile", "run"}


def texts() -> list[Path]:
    # The skipped folders are never entered: var/ holds the embedded PostgreSQL's data (the
    # suite's own server, and `make run`'s), whose files come and go while it runs, and a
    # folder removed mid-walk made rglob fail.
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP)
        for name in sorted(files):
            path = Path(folder) / name
            if (path.suffix in SUFFIXES or name in NAMES) and path.is_file():
                found.append(path)
    return found


def lines_matching(pattern: re.Pattern[str], *, besides: Collection[Path] = ()) -> list[str]:
    here = Path(__file__).resolve()
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in texts()
        if path != here and path not in besides
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_text_points_outside_the_repository() -> None:
    assert lines_matching(OUTSIDE) == []


def test_no_text_names_an_issue() -> None:
    assert lines_matching(ISSUE) == []


def test_sessions_are_named_only_in_the_benchmark_diary() -> None:
    assert lines_matching(SESSION, besides={DIARY}) == []


def test_the_formatter_lays_out_every_line() -> None:
    assert lines_matching(FORMATTER_OFF) == []


def test_every_docs_page_named_exists() -> None:
    missing = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in texts()
        for name in DOC_PATH.findall(path.read_text(errors="replace"))
        if not (ROOT / name).exists()
    }
    assert missing == set()


def test_every_file_the_docs_name_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = {
        f"{page.relative_to(ROOT)}: {name}"
        for page in pages
        for name in REPO_PATH.findall(page.read_text())
        if not (ROOT / name).exists()
    }
    assert missing == set()


@pytest.mark.parametrize(
    ("page", "named"), [(BENCHMARKS, BENCHMARK_SECTION), (DIARY, NOTEBOOK_SECTION)]
)
def test_every_benchmark_section_named_exists(page: Path, named: re.Pattern[str]) -> None:
    headings = {
        line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")
    }
    missing = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in texts()
        for name in named.findall(" ".join(path.read_text(errors="replace").split()))
        if not any(heading.startswith(name) for heading in headings)
    }
    assert missing == set()


def test_the_transitions_table_names_every_transition_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("\n## State transitions\n")[1].split("\n## ")[0]
    rows = set(re.findall(r"^\| `(\w+\.py)` \|", section, re.MULTILINE))
    modules = {p.name for p in (ROOT / "tasks" / "transitions").glob("*.py")} - {"__init__.py"}
    assert rows == modules


def test_the_api_page_is_the_contract() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    assert "the contract clients" in page.split("\n## ")[0]
    for section in ("Auth", "Tasks", "Endpoints", "Runs", "Notifications", "Operations", "Errors"):
        assert f"\n## {section}" in page, section
