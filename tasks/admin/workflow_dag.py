"""A workflow's DAG drawn as server-rendered SVG: no script, no vendored library.

Layered layout, left to right: a step's layer is the longest path to it from a root (a step
with no `after`), so every arrow points right. Within a layer the steps keep the workflow's
order, then sort by the mean row of their upstream steps, which untangles most fan-ins in one
pass. Each box carries its step id and status as words (colour is never the only sign); its
tone is display.TONES' (static/tasks/admin_dag.css draws them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from tasks.admin.display import TONES

BOX_W, BOX_H = 150, 40
GAP_X, GAP_Y = 70, 20
MARGIN = 12
NO_RUN = "not run"


@dataclass(frozen=True)
class Box:
    step_id: str
    x: int
    y: int


def layers(steps: list[dict]) -> dict[str, int]:
    """Each step's layer: 0 for a root, else one more than its deepest upstream step. Walked in
    topological order without recursion (a chain of 1,000 steps is allowed); the API refuses a
    cycle, and a step left on one anyway is put after the others."""
    after = {step["id"]: [a for a in step.get("after") or [] if a != step["id"]] for step in steps}
    after = {s: [a for a in upstream if a in after] for s, upstream in after.items()}
    waiting = {s: len(upstream) for s, upstream in after.items()}
    downstream: dict[str, list[str]] = {s: [] for s in after}
    for s, upstream in after.items():
        for a in upstream:
            downstream[a].append(s)
    found: dict[str, int] = {}
    ready = [s for s, count in waiting.items() if count == 0]
    while ready:
        step_id = ready.pop()
        found[step_id] = 1 + max((found[a] for a in after[step_id]), default=-1)
        for d in downstream[step_id]:
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
    deepest = max(found.values(), default=-1)
    return {s: found.get(s, deepest + 1) for s in after}


def layout(steps: list[dict]) -> dict[str, Box]:
    """Each step's box, placed by layer (column) and row."""
    layer_of = layers(steps)
    after = {step["id"]: list(step.get("after") or []) for step in steps}
    row: dict[str, float] = {}
    columns: dict[int, list[str]] = {}
    for step in steps:
        columns.setdefault(layer_of[step["id"]], []).append(step["id"])
    for layer in sorted(columns):
        ids = columns[layer]
        if layer:
            # A stable sort by the mean row of the upstream steps (placed already).
            ids.sort(key=lambda s: sum(row.get(a, 0) for a in after[s]) / max(len(after[s]), 1))
        for index, step_id in enumerate(ids):
            row[step_id] = index
    return {
        step_id: Box(
            step_id,
            MARGIN + layer_of[step_id] * (BOX_W + GAP_X),
            MARGIN + int(row[step_id]) * (BOX_H + GAP_Y),
        )
        for step_id in row
    }


def svg(steps: list[dict], statuses: Mapping[str, str], links: Mapping[str, str]) -> SafeString:
    """The DAG of `steps`, each box toned by `statuses[step id]` (absent: not run) and a link
    to `links[step id]` when there is one; an arrow per `after`, labelled with the step's `on`
    when it is not `success`."""
    boxes = layout(steps)
    if not boxes:
        return SafeString("-")
    width = max(b.x for b in boxes.values()) + BOX_W + MARGIN
    height = max(b.y for b in boxes.values()) + BOX_H + MARGIN
    edges = format_html_join(
        "",
        "{}",
        (
            (_edge(boxes[a], boxes[s["id"]], s.get("on") or "success"),)
            for s in steps
            for a in s.get("after") or []
            if a in boxes
        ),
    )
    nodes = format_html_join(
        "",
        "{}",
        ((_node(boxes[s["id"]], statuses.get(s["id"]), links.get(s["id"])),) for s in steps),
    )
    return format_html(
        '<svg class="dag" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" '
        'viewBox="0 0 {} {}" role="img" aria-label="workflow steps">'
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" class="arrowhead"/></marker></defs>'
        "{}{}</svg>",
        width,
        height,
        width,
        height,
        edges,
        nodes,
    )


def _edge(source: Box, target: Box, on: str) -> SafeString:
    x1, y1 = source.x + BOX_W, source.y + BOX_H // 2
    x2, y2 = target.x, target.y + BOX_H // 2
    bend = (x2 - x1) // 2
    line = format_html(
        '<path class="edge" data-from="{}" data-to="{}" d="M {} {} C {} {}, {} {}, {} {}" '
        'marker-end="url(#dag-arrow)"/>',
        source.step_id,
        target.step_id,
        x1,
        y1,
        x1 + bend,
        y1,
        x2 - bend,
        y2,
        x2,
        y2,
    )
    if on == "success":
        return line
    return format_html(
        '{}<text class="edge-label" x="{}" y="{}" text-anchor="middle">{}</text>',
        line,
        (x1 + x2) // 2,
        (y1 + y2) // 2 - 4,
        on,
    )


def _node(box: Box, status: str | None, link: str | None) -> SafeString:
    word = (status or NO_RUN).replace("_", " ")
    tone = TONES.get(status, "idle") if status else "none"
    label = box.step_id if len(box.step_id) <= 20 else box.step_id[:19] + "…"
    inner = format_html(
        '<g class="step tone-{}" data-step="{}" data-status="{}"><title>{}: {}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="6"/>'
        '<text class="step-id" x="{}" y="{}" text-anchor="middle">{}</text>'
        '<text class="step-status" x="{}" y="{}" text-anchor="middle">{}</text></g>',
        tone,
        box.step_id,
        status or "",
        box.step_id,
        word,
        box.x,
        box.y,
        BOX_W,
        BOX_H,
        box.x + BOX_W // 2,
        box.y + 17,
        label,
        box.x + BOX_W // 2,
        box.y + 32,
        word,
    )
    return format_html('<a href="{}">{}</a>', link, inner) if link else inner
