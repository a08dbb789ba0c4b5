"""Registered Python handlers: the `handler` payload kind's allow-list of functions."""

from __future__ import annotations

import functools
import importlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

HandlerFn = Callable[..., Any]
_registry: dict[str, HandlerFn] = {}


@dataclass(frozen=True)
class HandlerContext:
    """What a handler is told about the run it serves (docs/api.md: SCHEDULER_HANDLER_MODULES)."""

    task_id: str
    run_id: str
    attempt: int
    scheduled_at: datetime
    idempotency_key: str
    # A workflow step's upstream steps: {"<id>": {"output": ...}} (docs/workflows.md); {} else.
    steps: dict[str, Any] = field(default_factory=dict)


def register(name: str) -> Callable[[HandlerFn], HandlerFn]:
    """Register `fn(context, **args)` as `name`; returning is success, raising a failed attempt."""

    def decorator(fn: HandlerFn) -> HandlerFn:
        _registry[name] = fn
        return fn

    return decorator


def get(name: str) -> HandlerFn | None:
    return _registry.get(name)


def names() -> list[str]:
    return sorted(_registry)


def declared_arguments(name: str) -> list[str] | None:
    """The keyword arguments handler `name` declares, or None when it takes any (`**args`)."""
    declared = _declared(_registry[name])
    return None if declared is None else list(declared)


# Per function, not per name: a name registered again is a new function. Reading a signature
# cost a batch of 1,000 handler bodies more than the rest of their payloads' checks.
@functools.cache
def _declared(fn: HandlerFn) -> tuple[str, ...] | None:
    parameters = list(inspect.signature(fn).parameters.values())[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return tuple(p.name for p in parameters)


def load_handler_modules() -> None:
    """Import SCHEDULER_HANDLER_MODULES so every process knows the same handlers."""
    for module in settings.SCHEDULER_HANDLER_MODULES:
        importlib.import_module(module)


class HandlerFailed(Exception):
    """Raised by the built-in `fail` handler."""


@register("noop")
def noop(context: HandlerContext, **args: Any) -> None:
    return None


@register("echo")
def echo(context: HandlerContext, **args: Any) -> Any:
    return args


@register("sleep")
def sleep(context: HandlerContext, seconds: float = 1.0) -> None:
    time.sleep(float(seconds))


@register("fail")
def fail(context: HandlerContext, message: str = "the fail handler always fails") -> None:
    raise HandlerFailed(message)
