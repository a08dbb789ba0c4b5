from __future__ import annotations

from schedctl.main import app

app(prog_name="schedctl")
