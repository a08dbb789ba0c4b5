"""The `oidc_provider` fixture: the test OpenID Connect provider (tests/oidc_provider/) as a
process of its own on 127.0.0.1, with the people and the client a test names."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import ROOT, free_port, wait_for

CLIENT_ID, CLIENT_SECRET = "scheduler", "scheduler-client-secret"
API_AUDIENCE = "scheduler-api"
# RFC 8252: the provider accepts these on any port of the loopback address.
REDIRECT_URIS = ["http://127.0.0.1/oidc/callback/", "http://127.0.0.1/cli/callback"]


@dataclass
class Provider:
    base: str
    log: Path
    people: dict[str, str] = field(default_factory=dict)  # username -> password

    @property
    def issuer(self) -> str:
        return f"{self.base}/o"

    def scheduler_env(self, **extra: str) -> dict[str, str]:
        """The scheduler's OIDC_* settings for this provider."""
        return {
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_ISSUER": self.issuer,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.issuer}/authorize/",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.issuer}/token/",
            "OIDC_OP_USER_ENDPOINT": f"{self.issuer}/userinfo/",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.issuer}/.well-known/jwks.json",
            "OIDC_API_AUDIENCE": API_AUDIENCE,
            "OIDC_OPERATOR_GROUP": "scheduler-operators",
            **extra,
        }

    def access_token(self, username: str) -> str:
        """What a command-line client does: the code flow with PKCE, the browser's part done by
        `requests` (sign in on the provider's form, take the code from the redirect)."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        redirect_uri = "http://127.0.0.1:1/cli/callback"
        query = {
            "response_type": "code",
            "client_id": CLIENT_ID,
            "redirect_uri": redirect_uri,
            "scope": "openid profile email",
            "state": "cli",
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
        }
        session = requests.Session()
        authorize = f"{self.issuer}/authorize/?{urlencode(query)}"
        form = session.get(authorize, timeout=10)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert csrf, form.text
        signed_in = session.post(
            form.url,
            data={
                "csrfmiddlewaretoken": csrf.group(1),
                "username": username,
                "password": self.people[username],
                "next": authorize.removeprefix(self.base),
            },
            allow_redirects=False,
            timeout=10,
        )
        assert signed_in.status_code == 302, signed_in.text
        back = session.get(self.base + signed_in.headers["Location"], allow_redirects=False)
        location = back.headers["Location"]
        assert location.startswith(redirect_uri), location
        code = parse_qs(urlsplit(location).query)["code"][0]
        tokens = requests.post(
            f"{self.issuer}/token/",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "code_verifier": verifier,
            },
            timeout=10,
        )
        assert tokens.status_code == 200, self.log.read_text()[-3000:]
        return str(tokens.json()["access_token"])


@pytest.fixture(scope="session")
def provider_key(tmp_path_factory) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path_factory.mktemp("provider-key") / "key.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


@pytest.fixture
def oidc_provider(tmp_path, provider_key) -> Iterator[Callable[..., Provider]]:
    """`oidc_provider(people)` starts a provider knowing `people` (dicts of username, password,
    email, groups) and returns it; stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(people: list[dict[str, Any]]) -> Provider:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        setup = tmp_path / f"provider-{port}.json"
        setup.write_text(
            json.dumps(
                {
                    "users": people,
                    "client": {
                        "id": CLIENT_ID,
                        "secret": CLIENT_SECRET,
                        "redirect_uris": REDIRECT_URIS,
                    },
                }
            )
        )
        log = tmp_path / f"provider-{port}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc_provider.serve", str(port), str(setup)],
            cwd=ROOT,
            env={
                "PATH": "/usr/bin:/bin",
                "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
                "PROVIDER_ISSUER": f"{base}/o",
                "PROVIDER_API_AUDIENCE": API_AUDIENCE,
                "PROVIDER_KEY_FILE": str(provider_key),
                "PROVIDER_DB": str(tmp_path / f"provider-{port}.sqlite3"),
            },
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        started.append(proc)
        provider = Provider(base, log, {p["username"]: p["password"] for p in people})

        def up() -> bool:
            try:
                url = f"{provider.issuer}/.well-known/openid-configuration"
                return requests.get(url, timeout=2).status_code == 200
            except requests.RequestException:
                return proc.poll() is not None and _died(log)

        wait_for(up, timeout=60, interval=0.2, details=log.read_text)
        return provider

    yield start
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _died(log: Path) -> bool:
    raise AssertionError(f"the provider exited:\n{log.read_text()}")
