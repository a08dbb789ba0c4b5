"""`manage.py tasksetschema`: write the copies the command line ships, after a task field or the
cron parser changes: the task set file's JSON Schema (what /api/v1/tasksets/schema serves) and
tasks/schedule_cron.py (so `schedctl validate` refuses the expressions the service refuses)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from tasks.api.taskset_schema import taskset_schema


class Command(BaseCommand):
    help = "Write cli/schedctl/taskset.schema.json and cli/schedctl/schedule_cron.py."

    def add_arguments(self, parser: Any) -> None:
        default = Path(settings.BASE_DIR) / "cli" / "schedctl" / "taskset.schema.json"
        parser.add_argument("--output", type=Path, default=default)

    def handle(self, *args: Any, output: Path, **options: Any) -> None:
        output.write_text(json.dumps(taskset_schema(), indent=2, sort_keys=True) + "\n")
        self.stdout.write(f"wrote {output}")
        cron = output.with_name("schedule_cron.py")
        shutil.copyfile(Path(settings.BASE_DIR) / "tasks" / "schedule_cron.py", cron)
        self.stdout.write(f"wrote {cron}")
