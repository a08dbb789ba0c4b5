"""`manage.py tasksetschema`: write the task set file's JSON Schema (what
/api/v1/tasksets/schema serves) to the copy the command line ships, after a task field changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from tasks.api.taskset_schema import taskset_schema


class Command(BaseCommand):
    help = "Write cli/schedctl/taskset.schema.json from the API's schema."

    def add_arguments(self, parser: Any) -> None:
        default = Path(settings.BASE_DIR) / "cli" / "schedctl" / "taskset.schema.json"
        parser.add_argument("--output", type=Path, default=default)

    def handle(self, *args: Any, output: Path, **options: Any) -> None:
        output.write_text(json.dumps(taskset_schema(), indent=2, sort_keys=True) + "\n")
        self.stdout.write(f"wrote {output}")
