"""The admin site: open to every signed-in, active user, not only staff.

What each user sees there is scoped by the model admins (tasks/admin/scope.py): their own
objects, or everyone's for operators. Models without such scoping (users, groups, processes) keep
Django's permissions, which only operators hold.
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest


class SchedulerAdminSite(AdminSite):
    site_header = "Scheduler"
    site_title = "Scheduler"
    index_title = "Tasks, runs and notifications"
    site_url = "/api/docs/"  # "View site": the API a user's scripts call
    # The lists need the width: at 1,280 px the app sidebar pushed columns out of view (the
    # breadcrumbs and the index link the models instead).
    enable_nav_sidebar = False
    login_form = AuthenticationForm  # the admin's own form refuses non-staff accounts

    def has_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active)
