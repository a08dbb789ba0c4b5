"""`python -m bench WORKLOAD [options]`: set up Django, then run the workload (bench/cli.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> int:
    # The project root on the path (as manage.py has it), whatever the working directory.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    import django

    django.setup()
    from bench import cli  # after setup: the workloads import models

    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
