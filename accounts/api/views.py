"""Teams, their members, service accounts and tokens (docs/api.md, Teams).

A team is seen by its members (anyone else gets 404, as for another user's object) and
changed by its admins (403 for the other roles). People manage teams; a service token cannot
(`token_scopes` refuses every token here, accounts/token_auth.py).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access, teams, tokens
from accounts.api import serializers as bodies
from accounts.models import ApiToken, Membership, ServiceAccount, Team
from scheduler_project.auth import request_owner

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    403: OpenApiResponse(description="The caller's role in the team does not allow it."),
    404: OpenApiResponse(description="No such team among the caller's."),
}
NO_TOKENS = {"*": ()}  # people only


def my_teams(request: Request) -> QuerySet[Team]:
    user = request_owner(request)
    return Team.objects.filter(memberships__user=user).annotate(role=F("memberships__role"))


def team_of(request: Request, slug: str, need: str = access.VIEWER) -> Team:
    """The caller's team `slug`: 404 unless a member, 403 with less than role `need`."""
    team = get_object_or_404(my_teams(request), slug=slug)
    role: str = team.role  # type: ignore[attr-defined]  # annotated by my_teams
    if access.RANK[role] < access.RANK[need]:
        raise PermissionDenied(
            f"Your role in team {slug!r} is {role}; this needs {need}.", code="role"
        )
    return team


class TeamListCreateView(generics.ListAPIView):
    serializer_class = bodies.TeamOutputSerializer
    token_scopes = NO_TOKENS
    ordering = ["slug"]

    def get_queryset(self) -> QuerySet[Team]:
        if getattr(self, "swagger_fake_view", False):
            return Team.objects.none()
        return my_teams(self.request).order_by("slug")

    @extend_schema(
        request=bodies.TeamInputSerializer,
        responses={201: bodies.TeamOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        serializer = bodies.TeamInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        team = teams.create_team(creator=request_owner(request), **serializer.validated_data)
        found = my_teams(request).get(pk=team.pk)
        return Response(bodies.TeamOutputSerializer(found).data, status=status.HTTP_201_CREATED)


class TeamDetailView(APIView):
    token_scopes = NO_TOKENS

    @extend_schema(responses={200: bodies.TeamOutputSerializer, **ERRORS})
    def get(self, request: Request, slug: str) -> Response:
        return Response(bodies.TeamOutputSerializer(team_of(request, slug)).data)


def members(team: Team) -> QuerySet[Membership]:
    return team.memberships.select_related("user__service_account").order_by("user__username")


class MemberListView(APIView):
    token_scopes = NO_TOKENS

    @extend_schema(responses={200: bodies.MemberOutputSerializer(many=True), **ERRORS})
    def get(self, request: Request, slug: str) -> Response:
        found = members(team_of(request, slug))
        return Response(bodies.MemberOutputSerializer(found, many=True).data)

    @extend_schema(
        request=bodies.MemberInputSerializer,
        responses={
            201: bodies.MemberOutputSerializer,
            200: bodies.MemberOutputSerializer,
            **ERRORS,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        team = team_of(request, slug, access.ADMIN)
        serializer = bodies.MemberInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = teams.person_named(data["user"])
        if user is None:
            raise serializers.ValidationError({"user": ["No such person."]})
        membership, added = _set_member(team, user, data["role"])
        code = status.HTTP_201_CREATED if added else status.HTTP_200_OK
        return Response(bodies.MemberOutputSerializer(membership).data, status=code)


def _set_member(team: Team, user: Any, role: str) -> tuple[Membership, bool]:
    try:
        return teams.set_member(team=team, user=user, role=role)
    except teams.LastAdmin as exc:
        raise serializers.ValidationError({"role": [str(exc)]}) from None


class MemberDetailView(APIView):
    token_scopes = NO_TOKENS

    def _membership(self, team: Team, username: str) -> Membership:
        found = members(team).filter(user__username=username).first()
        if found is None:
            raise Http404("No such member.")
        return found

    @extend_schema(
        request=bodies.RoleSerializer, responses={200: bodies.MemberOutputSerializer, **ERRORS}
    )
    def patch(self, request: Request, slug: str, username: str) -> Response:
        team = team_of(request, slug, access.ADMIN)
        membership = self._membership(team, username)
        serializer = bodies.RoleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership, _ = _set_member(team, membership.user, serializer.validated_data["role"])
        return Response(bodies.MemberOutputSerializer(membership).data)

    @extend_schema(responses={204: None, **ERRORS})
    def delete(self, request: Request, slug: str, username: str) -> Response:
        team = team_of(request, slug, access.ADMIN)
        try:
            teams.remove_member(team=team, membership=self._membership(team, username))
        except teams.LastAdmin as exc:
            raise serializers.ValidationError({"user": [str(exc)]}) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountListView(APIView):
    token_scopes = NO_TOKENS

    @extend_schema(responses={200: bodies.ServiceAccountOutputSerializer(many=True), **ERRORS})
    def get(self, request: Request, slug: str) -> Response:
        team = team_of(request, slug, access.ADMIN)
        found = team.service_accounts.select_related("user").order_by("name")
        return Response(bodies.ServiceAccountOutputSerializer(found, many=True).data)

    @extend_schema(
        request=bodies.ServiceAccountInputSerializer,
        responses={201: bodies.ServiceAccountOutputSerializer, **ERRORS},
    )
    def post(self, request: Request, slug: str) -> Response:
        team = team_of(request, slug, access.ADMIN)
        serializer = bodies.ServiceAccountInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if team.service_accounts.filter(name=data["name"]).exists():
            raise serializers.ValidationError(
                {"name": ["The team has a service account so named."]}
            )
        account = teams.create_service_account(team=team, name=data["name"], role=data["role"])
        body = bodies.ServiceAccountOutputSerializer(account).data
        return Response(body, status=status.HTTP_201_CREATED)


def account_of(request: Request, slug: str, name: str) -> ServiceAccount:
    team = team_of(request, slug, access.ADMIN)
    return get_object_or_404(team.service_accounts.all(), name=name)


class TokenListView(APIView):
    token_scopes = NO_TOKENS

    @extend_schema(responses={200: bodies.TokenOutputSerializer(many=True), **ERRORS})
    def get(self, request: Request, slug: str, name: str) -> Response:
        found = account_of(request, slug, name).tokens.order_by("created_at", "id")
        return Response(bodies.TokenOutputSerializer(found, many=True).data)

    @extend_schema(
        request=bodies.TokenInputSerializer,
        responses={201: bodies.TokenCreatedSerializer, **ERRORS},
    )
    def post(self, request: Request, slug: str, name: str) -> Response:
        account = account_of(request, slug, name)
        serializer = bodies.TokenInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, text = tokens.make_token(account=account, **serializer.validated_data)
        body = bodies.TokenCreatedSerializer(token, context={"text": text}).data
        return Response(body, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    token_scopes = NO_TOKENS

    @extend_schema(responses={200: bodies.TokenOutputSerializer, **ERRORS})
    def delete(self, request: Request, slug: str, name: str, pk: int) -> Response:
        """Revoke the token: refused from the next request on. Answers it, revoked."""
        account = account_of(request, slug, name)
        token: ApiToken = get_object_or_404(account.tokens.all(), pk=pk)
        token = tokens.revoke(token, now=timezone.now())
        return Response(bodies.TokenOutputSerializer(token).data)
