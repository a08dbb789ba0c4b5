"""scheduler_project/settings.py states each setting once: every upper-case name is assigned by
one statement and never changed afterwards (no `X[...] = `, no `X.append(...)`), so the line a
reader finds is the whole truth about that setting."""

from __future__ import annotations

import ast
from collections import Counter

from tests.conftest import ROOT

SETTINGS = ROOT / "scheduler_project" / "settings.py"
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "remove", "clear"}


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """Every node of the module outside function bodies (settings run top to bottom)."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _target_names(node: ast.AST) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _base_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Subscript | ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_every_setting_is_assigned_by_one_statement() -> None:
    nodes = _module_level(ast.parse(SETTINGS.read_text()))
    counts = Counter(name for node in nodes for name in _target_names(node) if name.isupper())
    assert counts, "no settings found"
    assert {name: n for name, n in counts.items() if n > 1} == {}
    augmented = [
        n.target.id
        for n in nodes
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id.isupper()
    ]
    assert augmented == []


def test_no_setting_is_changed_after_it_is_built() -> None:
    changed = []
    for node in _module_level(ast.parse(SETTINGS.read_text())):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript | ast.Attribute):
                    changed.append(ast.unparse(target))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = _base_name(node.func.value)
            if node.func.attr in MUTATORS and base is not None and base.isupper():
                changed.append(ast.unparse(node))
    assert changed == []
