"""The admin's teams: who is in a team with which role, its service accounts and their tokens.

The rules are the API's (docs/api.md, Teams): a team and its members are seen by its members
(anyone else gets 404), service accounts and tokens by its admins; only a team's admins add,
change or remove members, make service accounts and tokens, and revoke tokens. Operators see
every team and act as its admin would. Every change goes through the API's services
(accounts/teams.py, accounts/tokens.py), so it is recorded in the audit log with its actor and
address, and the bodies are checked by the API's own serializers. A team's slug and name do not
change after it is made (the API has no rename either).

A token's text is shown once, on the page that answers its creation (never stored, never put in
a message cookie); its digest is never shown.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import Http404, HttpRequest
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from rest_framework import serializers

from accounts import teams, tokens
from accounts.access import ADMIN, RANK, is_operator
from accounts.api import serializers as bodies
from accounts.models import ApiToken, Membership, ServiceAccount, Team


def _roles_from(least: str) -> list[str]:
    return [role for role, rank in RANK.items() if rank >= RANK[least]]


def teams_of(user: Any, least: str) -> QuerySet[Team]:
    """The teams in which `user` holds at least role `least`; every team for an operator."""
    if is_operator(user):
        return Team.objects.all()
    held = Membership.objects.filter(user_id=user.pk, role__in=_roles_from(least))
    return Team.objects.filter(pk__in=held.values("team_id"))


def team_field(request: HttpRequest) -> forms.ModelChoiceField:
    """A form's choice of team: among those the user administers."""
    return forms.ModelChoiceField(
        queryset=teams_of(request.user, ADMIN).order_by("slug"),
        help_text="Among the teams you administer.",
    )


def _checked(serializer: serializers.Serializer, form: forms.BaseForm) -> dict[str, Any]:
    """The API serializer's verdict on the form's values, its errors put on the form's fields
    (or the form's own errors for a field the form does not have)."""
    if serializer.is_valid():
        return dict(serializer.validated_data)
    for name, errors in serializer.errors.items():
        field = name if name in form.fields else None
        for error in errors if isinstance(errors, list) else [errors]:
            form.add_error(field, str(error))
    return {}


class TeamScoped(admin.ModelAdmin):
    """Rows of one team each (`team_path`), seen by members of at least `sees` and changed by
    the team's admins; a row outside the user's teams is a 404."""

    team_path = "team"
    sees = "viewer"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        if is_operator(request.user):
            return queryset
        visible = teams_of(request.user, self.sees).values("pk")
        return queryset.filter(**{f"{self.team_path}__in": visible})

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        found = super().get_object(request, object_id, from_field)
        if found is None:
            raise Http404("No such object.")
        return found

    def team_of(self, obj: Any) -> Team:
        holder = obj
        for step in self.team_path.split("__"):
            holder = getattr(holder, step)
        return holder

    def may_admin(self, request: HttpRequest, obj: Any) -> bool:
        team = self.team_of(obj)
        return teams_of(request.user, ADMIN).filter(pk=team.pk).exists()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        # The form offers only the teams the user administers (none: nothing to choose).
        return bool(request.user.is_active)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TeamForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ["slug", "name"]

    def clean(self) -> dict[str, Any]:
        given = {"slug": self.cleaned_data.get("slug", ""), "name": self.cleaned_data.get("name")}
        self.checked = _checked(bodies.TeamInputSerializer(data=given), self)
        return self.cleaned_data

    def validate_unique(self) -> None:
        pass  # the serializer says it, in the API's words


@admin.register(Team)
class TeamAdmin(TeamScoped):
    """A team's page: its members with their roles, its service accounts and their tokens, and
    links to add one and to the team's audit log. Anyone may make a team (and is its admin)."""

    team_path = "pk"
    form = TeamForm
    list_display = ["slug", "name", "your_role", "members", "service_accounts", "created_at"]
    search_fields = ["slug", "name"]
    ordering = ["slug"]

    def team_of(self, obj: Any) -> Team:
        return obj

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        mine = Membership.objects.filter(team=OuterRef("pk"), user_id=request.user.pk or 0)
        people = Q(memberships__user__service_account__isnull=True)
        return (
            super()
            .get_queryset(request)
            .annotate(
                viewer_role=Subquery(mine.values("role")[:1]),
                member_count=Count("memberships", filter=people, distinct=True),
                account_count=Count("service_accounts", distinct=True),
            )
        )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["slug", "name"]
        return ["slug", "name", "created_at", "people", "machines", "log"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else self.get_fields(request, obj)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active)

    @admin.display(description="your role")
    def your_role(self, team: Any) -> str:
        return team.viewer_role or "operator"

    @admin.display(description="people", ordering="member_count")
    def members(self, team: Any) -> int:
        return team.member_count

    @admin.display(description="service accounts", ordering="account_count")
    def service_accounts(self, team: Any) -> int:
        return team.account_count

    @admin.display(description="members")
    def people(self, team: Team) -> SafeString:
        rows = team.memberships.select_related("user__service_account").order_by("user__username")
        listed = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:accounts_membership_change", args=[m.pk]),
                    m.user.get_username(),
                    m.role,
                    "service account" if hasattr(m.user, "service_account") else "person",
                )
                for m in rows
            ),
        )
        add = reverse("admin:accounts_membership_add") + f"?team={team.pk}"
        return format_html(
            '<table class="team-members">{}</table><a href="{}">Add a member</a>', listed, add
        )

    @admin.display(description="service accounts")
    def machines(self, team: Team) -> SafeString:
        accounts = team.service_accounts.annotate(
            live=Count("tokens", filter=Q(tokens__revoked_at=None))
        ).order_by("name")
        listed = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td></tr>',
            (
                (
                    reverse("admin:accounts_serviceaccount_change", args=[a.pk]),
                    a.name,
                    f"{a.live} token{'s' if a.live != 1 else ''} not revoked",
                )
                for a in accounts
            ),
        )
        add = reverse("admin:accounts_serviceaccount_add") + f"?team={team.pk}"
        return format_html('<table>{}</table><a href="{}">Add a service account</a>', listed, add)

    @admin.display(description="audit log")
    def log(self, team: Team) -> SafeString:
        url = reverse("admin:tasks_auditentry_changelist") + f"?team={team.slug}"
        return format_html('<a href="{}">Everything done in {}</a>', url, team.slug)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        made = teams.create_team(creator=request.user, **form.checked)
        obj.pk = made.pk


class MemberForm(forms.ModelForm):
    """Add a person to a team, or change a member's role."""

    username = forms.CharField(max_length=150, label="person", help_text="Their username.")

    class Meta:
        model = Membership
        fields = ["role"]

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is None:
            self.fields["team"] = team_field(request)
            self.order_fields(["team", "username", "role"])
        else:
            del self.fields["username"]

    def clean(self) -> dict[str, Any]:
        data = self.cleaned_data
        if self.instance.pk is None:
            given = {"user": data.get("username", ""), "role": data.get("role")}
            if _checked(bodies.MemberInputSerializer(data=given), self):
                self.person = teams.person_named(given["user"])
                if self.person is None:
                    self.add_error("username", "No such person.")
        elif (
            data.get("role") != Membership.Role.ADMIN
            and self.instance.role == Membership.Role.ADMIN
            and teams.is_last_admin(self.instance)
        ):
            self.add_error("role", "A team keeps at least one admin.")
        return data


@admin.register(Membership)
class MembershipAdmin(TeamScoped):
    list_display = ["user", "team", "role", "kind", "created_at"]
    list_filter = ["role"]
    list_select_related = ["user__service_account", "team"]
    search_fields = ["user__username", "team__slug"]
    ordering = ["team__slug", "user__username"]
    actions = ["remove_selected"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["team", "username", "role"] if obj is None else ["team", "user", "role"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else ["team", "user"]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any):
        kw["fields"] = ["role"]
        base = super().get_form(request, obj, change, form=MemberForm, **kw)

        class Bound(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, request=request, **kwargs)

        return Bound

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"team": request.GET.get("team"), "role": Membership.Role.VIEWER}

    @admin.display(description="kind")
    def kind(self, membership: Membership) -> str:
        return "service account" if hasattr(membership.user, "service_account") else "person"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None or self.may_admin(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is not None and self.may_admin(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        team = obj.team if change else form.cleaned_data["team"]
        user = obj.user if change else form.person
        membership, _ = teams.set_member(team=team, user=user, role=form.cleaned_data["role"])
        obj.pk, obj.team, obj.user = membership.pk, team, user  # for the admin's answer

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None):
        membership = self.get_object(request, object_id)
        if request.method == "POST" and teams.is_last_admin(membership):
            messages.error(request, "A team keeps at least one admin.")
            return redirect(reverse("admin:accounts_membership_change", args=[membership.pk]))
        return super().delete_view(request, object_id, extra_context)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        teams.remove_member(team=obj.team, membership=obj)

    @admin.action(description="Remove the selected members from their teams")
    def remove_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        removed = 0
        for membership in queryset.select_related("team", "user").order_by("pk"):
            if not self.may_admin(request, membership):
                continue
            try:
                teams.remove_member(team=membership.team, membership=membership)
            except teams.LastAdmin:
                name = membership.user.get_username()
                messages.error(request, f"{name} stays: {membership.team} keeps an admin.")
                continue
            removed += 1
        messages.info(request, f"{removed} removed.")


class ServiceAccountForm(forms.ModelForm):
    role = forms.ChoiceField(choices=[(r, r) for r in bodies.SERVICE_ROLES], initial="editor")

    class Meta:
        model = ServiceAccount
        fields = ["name"]

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"] = team_field(request)
        self.order_fields(["team", "name", "role"])

    def clean(self) -> dict[str, Any]:
        data = self.cleaned_data
        given = {"name": data.get("name", ""), "role": data.get("role")}
        self.checked = _checked(bodies.ServiceAccountInputSerializer(data=given), self)
        team = data.get("team")
        if team is not None and team.service_accounts.filter(name=given["name"]).exists():
            self.add_error("name", "The team has a service account so named.")
        return data

    def validate_unique(self) -> None:
        pass  # checked in clean, against the chosen team


@admin.register(ServiceAccount)
class ServiceAccountAdmin(TeamScoped):
    sees = ADMIN
    list_display = ["name", "team", "role", "live_tokens", "created_at"]
    list_select_related = ["team", "user"]
    search_fields = ["name", "team__slug"]
    ordering = ["team__slug", "name"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        role = Membership.objects.filter(user=OuterRef("user"), team=OuterRef("team"))
        return (
            super()
            .get_queryset(request)
            .annotate(
                held_role=Subquery(role.values("role")[:1]),
                live=Count("tokens", filter=Q(tokens__revoked_at=None)),
            )
        )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["team", "name", "role"] if obj is None else ["team", "name", "user", "tokens"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else self.get_fields(request, obj)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any):
        if obj is not None:
            return super().get_form(request, obj, change, **kw)
        kw["fields"] = ["name"]
        base = super().get_form(request, obj, change, form=ServiceAccountForm, **kw)

        class Bound(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, request=request, **kwargs)

        return Bound

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"team": request.GET.get("team"), "role": "editor"}

    @admin.display(description="role")
    def role(self, account: Any) -> str:
        return account.held_role or "-"

    @admin.display(description="tokens not revoked", ordering="live")
    def live_tokens(self, account: Any) -> int:
        return account.live

    @admin.display(description="tokens")
    def tokens(self, account: ServiceAccount) -> SafeString:
        listed = format_html_join(
            "",
            '<li><a href="{}">{}</a>: {}</li>',
            (
                (reverse("admin:accounts_apitoken_change", args=[t.pk]), t.name, _state(t))
                for t in account.tokens.order_by("-created_at", "-id")
            ),
        )
        add = reverse("admin:accounts_apitoken_add") + f"?account={account.pk}"
        return format_html('<ul>{}</ul><a href="{}">Make a token</a>', listed, add)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        team = form.cleaned_data["team"]
        made = teams.create_service_account(team=team, **form.checked)
        obj.pk, obj.team, obj.user = made.pk, team, made.user


def _state(token: ApiToken) -> str:
    if token.revoked_at is not None:
        return f"revoked {token.revoked_at:%Y-%m-%d %H:%M}"
    if token.expires_at <= timezone.now():
        return f"expired {token.expires_at:%Y-%m-%d}"
    return f"expires {token.expires_at:%Y-%m-%d}"


class TokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=[(s, s) for s in tokens.SCOPES], widget=forms.CheckboxSelectMultiple
    )
    expires_at = forms.DateTimeField(
        required=False,
        help_text=f"At most {bodies.MAX_TOKEN_DAYS} days ahead; empty: "
        f"{bodies.DEFAULT_TOKEN_DAYS} days from now.",
    )

    class Meta:
        model = ApiToken
        fields = ["account", "name"]

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        mine = teams_of(request.user, ADMIN).values("pk")
        accounts = ServiceAccount.objects.filter(team__in=mine).select_related("team")
        field: Any = self.fields["account"]
        field.queryset = accounts.order_by("team__slug", "name")
        field.label_from_instance = lambda account: f"{account.name} ({account.team.slug})"

    def clean(self) -> dict[str, Any]:
        data = self.cleaned_data
        given = {"name": data.get("name", ""), "scopes": data.get("scopes", [])}
        if data.get("expires_at") is not None:
            given["expires_at"] = data["expires_at"].isoformat()
        self.checked = _checked(bodies.TokenInputSerializer(data=given), self)
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(TeamScoped):
    team_path = "account__team"
    sees = ADMIN
    list_display = ["name", "account", "team", "scopes", "state", "last_used_at", "created_at"]
    list_select_related = ["account__team"]
    search_fields = ["name", "account__name", "account__team__slug"]
    ordering = ["-created_at", "-id"]
    actions = ["revoke_selected"]
    shown = ["account", "name", "scopes", "expires_at", "created_at", "last_used_at", "revoked_at"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["account", "name", "scopes", "expires_at"] if obj is None else self.shown

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else self.shown

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any):
        if obj is not None:
            return super().get_form(request, obj, change, **kw)
        kw["fields"] = ["account", "name"]
        base = super().get_form(request, obj, change, form=TokenForm, **kw)

        class Bound(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, request=request, **kwargs)

        return Bound

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        ahead = timezone.now() + timedelta(days=bodies.DEFAULT_TOKEN_DAYS)
        return {"account": request.GET.get("account"), "scopes": ["read"], "expires_at": ahead}

    @admin.display(description="team")
    def team(self, token: ApiToken) -> str:
        return token.account.team.slug

    @admin.display(description="state")
    def state(self, token: ApiToken) -> str:
        return _state(token)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        data = dict(form.checked)
        data.setdefault("expires_at", timezone.now() + timedelta(days=bodies.DEFAULT_TOKEN_DAYS))
        made, text = tokens.make_token(account=form.cleaned_data["account"], **data)
        obj.pk, obj.account = made.pk, made.account
        request.token_text = text  # type: ignore[attr-defined]  # for response_add alone

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: Any = None):
        # The text, this once: on this page only (a message would keep it in a cookie).
        text = getattr(request, "token_text", "")
        token = ApiToken.objects.select_related("account__team").get(pk=obj.pk)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Token {token.name} of {token.account.name} ({token.account.team.slug})",
            "token": token,
            "text": text,
            "opts": self.opts,
        }
        # The admin's views are never cached (no-store), this one included.
        return TemplateResponse(request, "admin/accounts/apitoken/created.html", context)

    @admin.action(description="Revoke the selected tokens")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        found = queryset.select_related("account__team").order_by("pk")
        revoked = [tokens.revoke(t, now=now) for t in found if t.revoked_at is None]
        messages.info(request, f"{len(revoked)} revoked; refused from their next request.")
