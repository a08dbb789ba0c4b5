"""The token routes' bodies: simplejwt's, refusing fields they do not take like every other body
(the class names stay simplejwt's, so the schema's component names do not change)."""

from __future__ import annotations

from rest_framework_simplejwt import serializers as jwt

from tasks.api.strict import StrictSerializer


class TokenObtainPairSerializer(StrictSerializer, jwt.TokenObtainPairSerializer):
    pass


class TokenRefreshSerializer(StrictSerializer, jwt.TokenRefreshSerializer):
    pass
