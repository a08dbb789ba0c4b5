"""`manage.py ensureadmin`: make sure a login exists for the quick start."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create the superuser named by DJANGO_SUPERUSER_USERNAME/PASSWORD (default user `admin` "
        "with a generated password, printed once) unless it already exists."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin")
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD", "")
        email = os.environ.get("DJANGO_SUPERUSER_EMAIL", "")
        user = User.objects.filter(username=username).first()
        if user is not None:
            if password and not user.check_password(password):
                user.set_password(password)
                user.save(update_fields=["password"])
                self.stdout.write(f"Password of {username!r} set from DJANGO_SUPERUSER_PASSWORD.")
            return
        generated = not password
        password = password or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email=email, password=password)
        if generated:
            self.stdout.write(
                f"Created login {username!r} with password {password!r}. It is shown only "
                "once: note it, or set DJANGO_SUPERUSER_PASSWORD and run again to change it."
            )
        else:
            self.stdout.write(f"Created login {username!r} from DJANGO_SUPERUSER_* variables.")
