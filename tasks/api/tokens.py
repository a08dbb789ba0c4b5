"""The token routes' bodies: simplejwt's, refusing fields they do not take like every other body.
The class names stay simplejwt's and drf-spectacular's descriptions of them apply, so the
schema (and clients generated from it) does not change."""

from __future__ import annotations

from drf_spectacular.contrib import rest_framework_simplejwt as described
from rest_framework_simplejwt import serializers as jwt

from tasks.api.strict import StrictSerializer


class TokenObtainPairSerializer(StrictSerializer, jwt.TokenObtainPairSerializer):
    pass


class TokenRefreshSerializer(StrictSerializer, jwt.TokenRefreshSerializer):
    pass


class TokenObtainPairSchema(described.TokenObtainPairSerializerExtension):
    target_class = "tasks.api.tokens.TokenObtainPairSerializer"


class TokenRefreshSchema(described.TokenRefreshSerializerExtension):
    target_class = "tasks.api.tokens.TokenRefreshSerializer"
