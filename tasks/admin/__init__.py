"""The Django admin operators and users run the service from: tasks, runs, processes, limit
keys, calendars, workflows and their runs, the audit log (and the dashboard,
tasks/admin_dashboard.py; who sees what is tasks/admin_scope.py). One module per page or model
admin; importing the package registers them.
"""

from __future__ import annotations

from django.contrib import admin

from tasks.admin import (  # noqa: F401  (each registers its model admin)
    audit,
    calendars,
    limits,
    process_admin,
    run_admin,
    task_admin,
    workflow_admin,
    workflow_run_admin,
)

# The index page links the dashboard (templates/admin/tasks_index.html).
admin.site.index_template = "admin/tasks_index.html"
