from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
# The API's reads price random reads as SSD storage has them (docs/operations.md, Tuning): a
# task's latest runs by a backward index scan. The API only: the workers' claim and record
# statements ran slower with it (bench throughput at W = 4, 0.82x against 0.95x).
os.environ.setdefault("DATABASE_RANDOM_PAGE_COST", "1.1")
# Its prepared reads keep one generic plan per connection instead of planning on every execution
# (scheduler_project/postgresql; `python -m bench plans`): a task read's statement 0.2 ms, not 0.6.
os.environ.setdefault("DATABASE_PLAN_CACHE_MODE", "force_generic_plan")
application = get_wsgi_application()
