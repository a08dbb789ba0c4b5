from __future__ import annotations

from schedctl.commands import app

app(prog_name="schedctl")
