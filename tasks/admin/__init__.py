"""The Django admin operators and users run the service from: one module per page or model
admin (importing the package registers them); who sees what is decided in `scope`, which every
model admin's queryset goes through."""

from __future__ import annotations

from django.contrib import admin

from tasks.admin import (  # noqa: F401  (each registers its model admin)
    audit,
    calendars,
    limits,
    process_admin,
    run_admin,
    task_admin,
    teams,
    workflow_admin,
    workflow_run_admin,
)

# The index page links the dashboard (templates/admin/tasks_index.html).
admin.site.index_template = "admin/tasks_index.html"
