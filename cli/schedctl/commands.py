"""Every `schedctl` command: main's and each command group's module (which builds on main's
client and output), so no module imports the one that imports it."""

from __future__ import annotations

from schedctl.main import app
from schedctl.workflows import runs_app, workflows_app

app.add_typer(workflows_app, name="workflows")
app.add_typer(runs_app, name="workflow-runs")

__all__ = ["app"]
