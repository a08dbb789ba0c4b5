"""factory-boy factories with minimal defaults; tests state the fields they depend on."""

from __future__ import annotations

from datetime import UTC, datetime

import factory
from django.contrib.auth import get_user_model

from tasks.models import Run, Task


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("password-123")


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task

    owner = factory.SubFactory(UserFactory)
    kind = Task.Kind.HANDLER
    payload = factory.LazyFunction(lambda: {"name": "noop", "args": {}})
    schedule = factory.LazyFunction(
        lambda: {"type": "once", "run_at": datetime.now(UTC).isoformat().replace("+00:00", "Z")}
    )
    schedule_type = "once"


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    task = factory.SubFactory(TaskFactory)
    owner = factory.SelfAttribute("task.owner")
    scheduled_at = factory.LazyFunction(lambda: datetime.now(UTC))
    execute_at = factory.SelfAttribute("scheduled_at")
    priority = factory.SelfAttribute("task.priority")
    max_attempts = factory.SelfAttribute("task.max_attempts")
