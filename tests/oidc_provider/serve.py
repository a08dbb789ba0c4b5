"""`python -m tests.oidc_provider.serve PORT SETUP_JSON`: migrate the provider's SQLite file, add
the users and the client the JSON names, and serve on 127.0.0.1:PORT until SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"provider: {format % args}\n")


def setup(config: dict) -> None:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0)
    for person in config["users"]:
        user = User.objects.create_user(
            person["username"], email=person.get("email", ""), password=person["password"]
        )
        for name in person.get("groups", []):
            user.groups.add(Group.objects.get_or_create(name=name)[0])
    client = config["client"]
    Application.objects.create(
        name="scheduler",
        client_id=client["id"],
        client_secret=client["secret"],
        hash_client_secret=False,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(client["redirect_uris"]),
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


def main() -> None:
    port, setup_file = int(sys.argv[1]), Path(sys.argv[2])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")
    import django

    django.setup()
    setup(json.loads(setup_file.read_text()))
    from django.core.wsgi import get_wsgi_application

    server = make_server("127.0.0.1", port, get_wsgi_application(), Server, QuietHandler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"provider listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
