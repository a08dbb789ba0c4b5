"""Adding a channel in the admin, as `POST /api/v1/channels` does: the same validation (the
API's serializer: fields per kind, the SSRF guard on URLs, secrets checked), encryption of the
secrets and, for a webhook created without a secret, the generated signing secret shown on the
next page once and never again (only `has_secret` shows after that). The channel is the
signed-in user's.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from notifications import services
from notifications.api.serializers import ChannelInputSerializer
from notifications.models import Channel
from tasks.events import EVENTS

SECRET_FIELDS = ("secret", "webhook_url", "token")


class ChannelAddForm(forms.Form):
    kind = forms.ChoiceField(choices=Channel.Kind.choices)
    name = forms.CharField(max_length=200, required=False)
    address = forms.CharField(required=False, help_text="email: the address")
    url = forms.CharField(required=False, help_text="webhook: the URL it posts to")
    secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput,
        help_text="webhook: a whsec_ signing secret; empty: one is generated and shown once",
    )
    webhook_url = forms.CharField(
        required=False, widget=forms.PasswordInput, help_text="slack: the incoming webhook URL"
    )
    token = forms.CharField(
        required=False, widget=forms.PasswordInput, help_text="slack (bot): the bot token"
    )
    channel = forms.CharField(required=False, help_text="slack (bot): the channel")
    all_tasks_events = forms.MultipleChoiceField(
        choices=[(e, e) for e in EVENTS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="events of all your tasks this channel hears (a task's notify adds its own)",
    )

    def api_body(self) -> dict[str, Any]:
        data = self.cleaned_data
        body = {name: value for name, value in data.items() if value not in ("", None, [])}
        return body


class ChannelAdd(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        form = ChannelAddForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            serializer = ChannelInputSerializer(data=form.api_body())
            if serializer.is_valid():
                channel = services.create_channel(
                    owner=request.user, data=serializer.validated_data
                )
                self.log_addition(request, channel, "Added")
                return self._created(request, channel, serializer.validated_data)
            for field, errors in serializer.errors.items():
                form.add_error(field if field in form.fields else None, [str(e) for e in errors])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Add channel",
            "form": form,
        }
        return TemplateResponse(request, "admin/notifications/channel/add.html", context)

    def _created(self, request: HttpRequest, channel: Channel, data: dict) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Channel added",
            "channel": channel,
            "generated_secret": data.get("generated_secret"),
            "change_url": reverse("admin:notifications_channel_change", args=[channel.pk]),
        }
        # The admin's pages are never cached (admin_view's never_cache): nor is this secret.
        return TemplateResponse(request, "admin/notifications/channel/added.html", context)
