"""docs/operations.md is an operator's guide: what to set and why. The runs behind its figures
(commit ids, clock times, sessions, machine load) are development records: docs/benchmarks.md
(the current figures) and bench/NOTEBOOK.md (how they came about)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

DIARY = {
    "a commit id": r"`[0-9a-f]{7,40}`",
    "a clock time": r"\b\d{1,2}:\d{2}(-\d{1,2}:\d{2})? *(UTC)?\)|\bat \d{1,2}:\d{2}\b",
    "a session": r"\b[Ss]ession \d",
    "machine load": r"load average",
    "an issue number": r"\bissue \d+",
}


def test_operations_guide_holds_no_development_diary() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()

    found = {what: re.findall(pattern, text) for what, pattern in DIARY.items()}

    assert {what: hits for what, hits in found.items() if hits} == {}


def test_the_figures_it_points_to_are_in_the_benchmarks() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text()

    pointers = re.findall(r'docs/benchmarks\.md,\s+"([^"]+)"', operations)

    assert pointers
    for title in pointers:
        assert re.search(rf"^#+ {re.escape(title)}", benchmarks, re.M), title
