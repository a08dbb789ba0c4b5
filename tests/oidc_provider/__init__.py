"""A real OpenID Connect provider for the tests: a tiny Django project on django-oauth-toolkit's
OIDC support, run as its own process (`tests/oidc_server.py` starts it). It signs ID tokens and,
unlike DOT's default opaque strings, JWT access tokens (RS256, `aud` = the scheduler's API), the
kind Keycloak, Okta and Entra ID issue, so the API's check of provider tokens meets a real one.
"""
