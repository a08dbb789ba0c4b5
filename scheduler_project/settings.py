"""Settings for every role, read from environment variables (docs/configuration.md)."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
TESTING = "pytest" in sys.modules or os.environ.get("SCHEDULER_TESTING") == "true"


def env_bool(name: str, default: bool) -> bool:
    """Only `true`/`false` are accepted: a typo must not silently flip a switch."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {value!r}") from None


def env_secret(name: str, default: str = "") -> str:
    """`NAME_FILE` (a mounted secret) wins over `NAME`."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, default)


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
DATA_DIR = Path(os.environ.get("SCHEDULER_DATA_DIR", BASE_DIR / "var"))
DATABASE_URL = os.environ.get("DATABASE_URL", "")
SECRET_KEY = env_secret("SECRET_KEY")
if not SECRET_KEY:
    if TESTING:
        SECRET_KEY = "insecure-test-key-do-not-use-in-production-0123456789abcdef"
    elif not DATABASE_URL:
        # The quick start (embedded database): a key generated once, kept beside the data.
        from scheduler_project.embedded_db import local_secret_key

        SECRET_KEY = local_secret_key(DATA_DIR / "secret_key")
        os.environ["SECRET_KEY"] = SECRET_KEY  # the roles runall starts inherit it
    else:
        raise ImproperlyConfigured("SECRET_KEY must be set when DATABASE_URL is")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_simplejwt",
    "django_filters",
    "drf_spectacular",
    "tasks",
    "notifications",
    "reviewers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "scheduler_project.urls"
WSGI_APPLICATION = "scheduler_project.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# One DATABASE_URL; unset means the embedded PostgreSQL (pgserver) in SCHEDULER_DATA_DIR.
if not DATABASE_URL:
    from scheduler_project.embedded_db import ensure_embedded_database

    DATABASE_URL = ensure_embedded_database(DATA_DIR / "pgdata")
    os.environ["DATABASE_URL"] = DATABASE_URL  # child processes reuse the same server
DATABASES = {"default": environ.Env.db_url_config(DATABASE_URL)}
# A socket directory travels percent-encoded in the URL's host part.
DATABASES["default"]["HOST"] = unquote(str(DATABASES["default"].get("HOST") or ""))
DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"].setdefault("OPTIONS", {})
DATABASES["default"]["OPTIONS"]["application_name"] = os.environ.get(
    "SCHEDULER_APPLICATION_NAME", "scheduler"
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", DATA_DIR / "media"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework_simplejwt.authentication.JWTAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # orjson, and PostgreSQL-built JSON written as is (tasks/api/renderers.py).
    "DEFAULT_RENDERER_CLASSES": [
        "tasks.api.renderers.ORJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "tasks.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "tasks.api.filtering.FilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "tasks.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=env_int("JWT_ACCESS_TOKEN_MINUTES", 15)),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=env_int("JWT_REFRESH_TOKEN_DAYS", 7)),
    "SIGNING_KEY": env_secret("JWT_SIGNING_KEY") or SECRET_KEY,
    "ALGORITHM": "HS256",
    "UPDATE_LAST_LOGIN": False,
}
# A token's user is read once per this many seconds per API process (scheduler_project/auth.py):
# a deactivated or deleted user is refused within it. 0: on every request.
SCHEDULER_AUTH_USER_CACHE_SECONDS = env_float("SCHEDULER_AUTH_USER_CACHE_SECONDS", 5.0)

SPECTACULAR_SETTINGS = {
    "TITLE": "Scheduler API",
    "DESCRIPTION": "Schedule one-time and recurring tasks; track their runs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}

EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "scheduler@localhost")

# --- The scheduler's own settings (docs/configuration.md lists every one) ---
# The scheduler materialises runs this far ahead of their time; workers claim runs this far
# ahead and start each on the dot, so a run's start does not wait for a database round trip.
TASKS_LOOKAHEAD_SECONDS = env_float("TASKS_LOOKAHEAD_SECONDS", 30.0)
TASKS_PREFETCH_SECONDS = env_float("TASKS_PREFETCH_SECONDS", 0.5)
# An occurrence planned later than this after its time counts as missed (misfire policy applies).
TASKS_MISFIRE_GRACE_SECONDS = env_float("TASKS_MISFIRE_GRACE_SECONDS", 60.0)
# A worker woken by one finished run waits this long for others still in flight, so one commit
# records them together; it delays recording, never starting.
TASKS_COALESCE_SECONDS = env_float("TASKS_COALESCE_SECONDS", 0.002)
# Runs a worker may hold claimed beyond its --concurrency, started as slots free (0 disables):
# at most this many, and only as many as its recent runs would start within
# TASKS_CLAIM_AHEAD_WAIT_SECONDS, so short runs are claimed in large batches and long runs are
# never held back from idle workers.
TASKS_CLAIM_AHEAD = env_int("TASKS_CLAIM_AHEAD", 32)
TASKS_CLAIM_AHEAD_WAIT_SECONDS = env_float("TASKS_CLAIM_AHEAD_WAIT_SECONDS", 0.05)
TASKS_POLL_INTERVAL_SECONDS = env_float("TASKS_POLL_INTERVAL_SECONDS", 1.0)
TASKS_HEARTBEAT_SECONDS = env_float("TASKS_HEARTBEAT_SECONDS", 2.0)
TASKS_DEFAULT_MAX_ATTEMPTS = env_int("TASKS_DEFAULT_MAX_ATTEMPTS", 5)
TASKS_DEFAULT_BACKOFF_BASE_SECONDS = env_float("TASKS_DEFAULT_BACKOFF_BASE_SECONDS", 2.0)
TASKS_DEFAULT_BACKOFF_CAP_SECONDS = env_float("TASKS_DEFAULT_BACKOFF_CAP_SECONDS", 600.0)
TASKS_DEFAULT_TIMEOUT_SECONDS = env_float("TASKS_DEFAULT_TIMEOUT_SECONDS", 3600.0)
TASKS_OUTPUT_MAX_BYTES = env_int("TASKS_OUTPUT_MAX_BYTES", 64 * 1024)
TASKS_START_SLA_SECONDS = env_float("TASKS_START_SLA_SECONDS", 10.0)
TASKS_OWNER_MAX_RUNNING = env_int("TASKS_OWNER_MAX_RUNNING", 100)
TASKS_SHUTDOWN_GRACE_SECONDS = env_float("TASKS_SHUTDOWN_GRACE_SECONDS", 30.0)
REVIEWERS_RESCUE_AFTER_SECONDS = env_float("REVIEWERS_RESCUE_AFTER_SECONDS", 10.0)
REVIEWERS_INTERVAL_SECONDS = env_float("REVIEWERS_INTERVAL_SECONDS", 1.0)
REVIEWERS_PROCESS_DEAD_AFTER_SECONDS = env_float("REVIEWERS_PROCESS_DEAD_AFTER_SECONDS", 15.0)
SCHEDULER_HANDLER_MODULES = env_list("SCHEDULER_HANDLER_MODULES")
SCHEDULER_OUTBOUND_ALLOW = env_list("SCHEDULER_OUTBOUND_ALLOW")
SCHEDULER_OUTBOUND_TIMEOUT_SECONDS = env_float("SCHEDULER_OUTBOUND_TIMEOUT_SECONDS", 10.0)
SCHEDULER_METRICS_TOKEN = env_secret("SCHEDULER_METRICS_TOKEN")
SCHEDULER_PUBLIC_URL = os.environ.get("SCHEDULER_PUBLIC_URL", "http://127.0.0.1:8000")

# LOGGING: see the operations block at the end (JSON lines, redaction).
SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY = env_bool("SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY", False)
SCHEDULER_MAX_UPLOAD_BYTES = env_int("SCHEDULER_MAX_UPLOAD_BYTES", 10 * 2**20)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("SCHEDULER_MAX_JSON_BYTES", 2 * 2**20)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 2**20

# --- Notifications (issue 5; docs/notifications.md lists every one) ---------------------------
# Workers run a delivery thread; set false to deliver only from `manage.py runnotifier`.
NOTIFICATIONS_DELIVER_IN_WORKER = env_bool("NOTIFICATIONS_DELIVER_IN_WORKER", True)
NOTIFICATIONS_BATCH_SIZE = env_int("NOTIFICATIONS_BATCH_SIZE", 20)
NOTIFICATIONS_DELIVERY_CONCURRENCY = env_int("NOTIFICATIONS_DELIVERY_CONCURRENCY", 4)
# LISTEN/NOTIFY wakes deliverers at once; this poll only bounds how long a missed wake-up lasts.
NOTIFICATIONS_POLL_SECONDS = env_float("NOTIFICATIONS_POLL_SECONDS", 5.0)
# A claimed notification is not claimed again for this long (a deliverer died mid-send).
NOTIFICATIONS_LEASE_SECONDS = env_float("NOTIFICATIONS_LEASE_SECONDS", 120.0)
NOTIFICATIONS_RETRY_BASE_SECONDS = env_float("NOTIFICATIONS_RETRY_BASE_SECONDS", 5.0)
NOTIFICATIONS_RETRY_CAP_SECONDS = env_float("NOTIFICATIONS_RETRY_CAP_SECONDS", 600.0)
NOTIFICATIONS_RETRY_WINDOW_SECONDS = env_float("NOTIFICATIONS_RETRY_WINDOW_SECONDS", 3600.0)
SCHEDULER_SLACK_API_URL = os.environ.get("SCHEDULER_SLACK_API_URL", "https://slack.com/api/")
# Fernet key(s) for channel secrets at rest, comma-separated (the first encrypts). Tests and the
# embedded quick start (whose SECRET_KEY was generated into SCHEDULER_DATA_DIR) derive one from
# SECRET_KEY; a deployment sets its own (notifications.W001 warns when it is missing).
SCHEDULER_ENCRYPTION_KEY = env_secret("SCHEDULER_ENCRYPTION_KEY")
_QUICKSTART_KEY_FILE = DATA_DIR / "secret_key"
if not SCHEDULER_ENCRYPTION_KEY and (
    TESTING
    or (_QUICKSTART_KEY_FILE.is_file() and _QUICKSTART_KEY_FILE.read_text().strip() == SECRET_KEY)
):
    import base64
    import hashlib

    _digest = hashlib.sha256(b"scheduler-notifications-secrets:" + SECRET_KEY.encode()).digest()
    SCHEDULER_ENCRYPTION_KEY = base64.urlsafe_b64encode(_digest).decode("ascii")

# --- Operations (issue 6: logs, metrics, health, retention, read replicas) --------------------
# docs/configuration.md lists every variable below; docs/operations.md says how to use them.
from scheduler_project.logging import logging_config  # noqa: E402

# JSON lines for log shippers in production; plain text for people (DEBUG) and tests.
LOG_FORMAT = os.environ.get("LOG_FORMAT") or ("plain" if DEBUG or TESTING else "json")
LOGGING = logging_config(log_format=LOG_FORMAT, level=os.environ.get("LOG_LEVEL", "INFO"))
# API request count and latency by route; first, so it times every other middleware as well.
MIDDLEWARE.insert(0, "tasks.api.request_metrics.RequestMetricsMiddleware")
# /metrics' start-lateness histogram and notification figures cover this recent window.
SCHEDULER_METRICS_WINDOW_SECONDS = env_float("SCHEDULER_METRICS_WINDOW_SECONDS", 300.0)
# /health warns (without failing) when a notification has been pending this long.
SCHEDULER_HEALTH_NOTIFICATION_WARN_SECONDS = env_float(
    "SCHEDULER_HEALTH_NOTIFICATION_WARN_SECONDS", 300.0
)
# Retention: finished runs (with attempts and notifications) older than this are pruned by the
# reviewer, per final status; ten years by default, as the storage sizing assumes.
REVIEWERS_RETENTION_DAYS = env_int("REVIEWERS_RETENTION_DAYS", 3650)
REVIEWERS_RETENTION_DAYS_BY_STATUS = {
    status: env_int(f"REVIEWERS_RETENTION_DAYS_{status.upper()}", REVIEWERS_RETENTION_DAYS)
    for status in ("succeeded", "failed", "cancelled", "skipped")
}
REVIEWERS_PRUNE_BATCH_SIZE = env_int("REVIEWERS_PRUNE_BATCH_SIZE", 1000)
REVIEWERS_PRUNE_INTERVAL_SECONDS = env_float("REVIEWERS_PRUNE_INTERVAL_SECONDS", 60.0)
REVIEWERS_PROCESS_RETENTION_DAYS = env_int("REVIEWERS_PROCESS_RETENTION_DAYS", 7)
REVIEWERS_SAMPLE_RETENTION_DAYS = env_int("REVIEWERS_SAMPLE_RETENTION_DAYS", 30)
# A read replica for the API's GET requests (scheduler_project/routers.py); every write, and
# every read by the scheduler, worker and reviewer, stays on the primary.
DATABASE_REPLICA_URL = env_secret("DATABASE_REPLICA_URL")
if DATABASE_REPLICA_URL:
    _replica = environ.Env.db_url_config(DATABASE_REPLICA_URL)
    DATABASES["replica"] = {
        **DATABASES["default"],
        **_replica,
        "ENGINE": "django.db.backends.postgresql",
        "HOST": unquote(str(_replica.get("HOST") or "")),
        "OPTIONS": {**DATABASES["default"]["OPTIONS"], **_replica.get("OPTIONS", {})},
        "TEST": {"MIRROR": "default"},
    }
    DATABASE_ROUTERS = ["scheduler_project.routers.ReplicaRouter"]
    MIDDLEWARE.append("scheduler_project.routers.ReplicaReadMiddleware")

# --- Security (issue 8; docs/security.md says what each line defends against) ----------------
import re  # noqa: E402

# Request bodies: 413 as JSON over these limits, before anything reads the body (chunked too).
SCHEDULER_MAX_JSON_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware"),
    "scheduler_project.middleware.RequestSizeLimitMiddleware",
)
FILE_UPLOAD_HANDLERS = [
    "scheduler_project.middleware.UploadSizeLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Writes per user (DRF rate: "<count>/<second|minute|hour|day>"; empty: no limit) → 429.
SCHEDULER_WRITE_RATE = os.environ.get("SCHEDULER_WRITE_RATE", "1200/minute")
if SCHEDULER_WRITE_RATE and not re.fullmatch(r"[0-9]+/(s|m|h|d)[a-z]*", SCHEDULER_WRITE_RATE):
    raise ImproperlyConfigured(
        f"SCHEDULER_WRITE_RATE must look like 1200/minute, not {SCHEDULER_WRITE_RATE!r}"
    )
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["tasks.api.throttling.WriteRateThrottle"]
# DRF's parsers, but JSON nested past the recursion limit is a 400 (tasks.api.parsers), not a 500.
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = [
    "tasks.api.parsers.JSONParser",
    "rest_framework.parsers.FormParser",
    "rest_framework.parsers.MultiPartParser",
]
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = ["scheduler_project.auth.JWTAuthentication"]
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [
    "drf_spectacular.hooks.postprocess_schema_enums",
    "scheduler_project.schema.document_errors",
]
# The key that signs the service's own tokens: 32 bytes at least (HS256's key size).
if len(SIMPLE_JWT["SIGNING_KEY"].encode()) < 32 and not TESTING:
    raise ImproperlyConfigured(
        "JWT_SIGNING_KEY (or SECRET_KEY when it is unset) must be at least 32 bytes long"
    )
# Tokens of an external identity provider (asymmetric only), verified by scheduler_project.auth.
SCHEDULER_EXTERNAL_JWT: dict | None = None
if env_secret("JWT_VERIFYING_KEY") or os.environ.get("JWT_JWK_URL"):
    SCHEDULER_EXTERNAL_JWT = {
        "ALGORITHM": os.environ.get("JWT_ALGORITHM") or "RS256",
        "VERIFYING_KEY": env_secret("JWT_VERIFYING_KEY"),
        "JWK_URL": os.environ.get("JWT_JWK_URL", ""),
        "AUDIENCE": os.environ.get("JWT_AUDIENCE") or None,
        "ISSUER": os.environ.get("JWT_ISSUER") or None,
        "USER_CLAIM": os.environ.get("JWT_USER_CLAIM") or "sub",
        "USER_FIELD": os.environ.get("JWT_USER_FIELD") or "username",
        "LEEWAY_SECONDS": env_int("JWT_LEEWAY_SECONDS", 0),
    }
    if SCHEDULER_EXTERNAL_JWT["ALGORITHM"] not in (
        *("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"),
        "EdDSA",
    ):
        raise ImproperlyConfigured("JWT_ALGORITHM must be an asymmetric algorithm such as RS256")
# TLS terminated by a reverse proxy that sets X-Forwarded-Proto: secure cookies, HTTPS redirect
# (probes and scrapers on /health and /metrics stay on plain HTTP) and HSTS. Off for the quick
# start, which serves plain HTTP on 127.0.0.1.
SCHEDULER_BEHIND_TLS_PROXY = env_bool("SCHEDULER_BEHIND_TLS_PROXY", False)
if SCHEDULER_BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^health(/live)?$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SCHEDULER_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SCHEDULER_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SCHEDULER_HSTS_PRELOAD", False)
# urllib3 logs each request line at DEBUG, path and query included: a Slack webhook URL's path
# is its credential, and that line has no scheme or host for the redaction filter to spot.
LOGGING["loggers"].setdefault("urllib3", {"level": "INFO"})
# One name per choice set, so the served schema is stable and `check --deploy` has no warning.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "TaskKindEnum": "tasks.models.Task.Kind",
    "TaskStatusEnum": "tasks.models.Task.Status",
    "RunStatusEnum": "tasks.models.Run.Status",
    "ChannelKindEnum": "notifications.models.Channel.Kind",
    "NotificationStatusEnum": "notifications.models.Notification.Status",
    "NotificationEventEnum": "notifications.models.Notification.Event",
    "EventEnum": "notifications.models.EVENTS",
}
