"""django.contrib.admin with our site (scheduler_project/admin_site.py) as `admin.site`; a
module of its own because INSTALLED_APPS imports it before models may be imported."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class SchedulerAdminConfig(AdminConfig):
    default_site = "scheduler_project.admin_site.SchedulerAdminSite"
