"""The apps depend one way: notifications knows tasks, tasks knows nothing of notifications.

tasks reaches notifications only through its own outbox (tasks/outbox.py: the SQL function
`notifications_enqueue`, and the check notifications registers) and through the worker's
companion threads that notifications registers; no module of tasks imports it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = "notifications"
# A whole string that is a dotted path into the app (import_string, settings-like indirection).
DOTTED_PATH = re.compile(rf"{FORBIDDEN}(\.\w+)*")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def references(source: str, *, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, what) for every import of the forbidden app in `source`, wherever it stands
    (function bodies and `if TYPE_CHECKING:` blocks too), and every string that is a dotted
    path into it."""
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DOTTED_PATH.fullmatch(node.value) and "." in node.value:
                yield node.lineno, f"the string {node.value!r}"
            continue
        for name in names:
            if name == FORBIDDEN or name.startswith(FORBIDDEN + "."):
                yield node.lineno, f"import of {name}"
                break


def offences(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "tasks").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        module = module_name(path, root)
        for line, what in references(source, module=module, is_package=path.name == "__init__.py"):
            found.append(f"{path.relative_to(root)}:{line}: {what}")
    return found


def test_tasks_imports_nothing_from_notifications() -> None:
    assert offences(ROOT) == []


def test_the_check_finds_every_form_of_reaching_the_app() -> None:
    source = """
from __future__ import annotations
from typing import TYPE_CHECKING
import notifications.models
from notifications import http
if TYPE_CHECKING:
    from notifications.models import Channel
def late():
    from notifications.delivery_thread import start_delivery_thread
    return import_string("notifications.api.serializers.validate_notify_channels")
"""
    found = references(source, module="tasks.api.views", is_package=False)
    assert sorted(line for line, _ in found) == [4, 5, 7, 9, 10]


def test_words_that_only_mention_the_app_are_not_references() -> None:
    source = '''
"""Queues notifications (notifications.W001 aside)."""
import tasks.outbox
from tasks import notifications_helper
EVENT = "notifications"
'''
    assert list(references(source, module="tasks.outbox", is_package=False)) == []
