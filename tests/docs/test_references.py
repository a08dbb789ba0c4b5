"""The documentation stays inside the repository: no page, comment or test points a reader to
a file that is not in it (design notes or contracts kept elsewhere), and every `docs/...` page
a text names exists. The contract clients rely on is docs/api.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"shared/|\b(?:API|DESIGN|BENCHMARK|STYLE)\.md\b|seed documents")
DOC_PATH = re.compile(r"\bdocs/[\w-]+\.md\b")
SKIP = {".git", ".venv", "var", "node_modules", "staticfiles", "__pycache__"}


def texts() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if SKIP & set(path.relative_to(ROOT).parts) or not path.is_file():
            continue
        if path.suffix in {".md", ".py", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".html"}:
            found.append(path)
    return found


def test_no_text_points_outside_the_repository() -> None:
    offending = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in texts()
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert offending == []


def test_every_docs_page_named_exists() -> None:
    missing = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in texts()
        for name in DOC_PATH.findall(path.read_text(errors="replace"))
        if not (ROOT / name).exists()
    }
    assert missing == set()


def test_the_api_page_is_the_contract() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    assert "the contract clients" in page.split("\n## ")[0]
    for section in ("Auth", "Tasks", "Endpoints", "Runs", "Notifications", "Operations", "Errors"):
        assert f"\n## {section}" in page, section
