"""Settings for every role, read from environment variables (docs/configuration.md lists every
variable). Grouped by concern; each setting is assigned once. Lower-case names are inputs used
only here, so Django does not expose them as settings."""

from __future__ import annotations

import os
import re
import sys
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from scheduler_project import settings_fallbacks as fallbacks
from scheduler_project.database import databases
from scheduler_project.logging import logging_config
from scheduler_project.storage_settings import storages

# --- Reading the environment ------------------------------------------------------------------


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


def env_team_groups(name: str) -> dict[str, tuple[str, str]]:
    """`group=team:role,...` as {group: (team slug, role)}; ImproperlyConfigured when malformed."""
    mapping = {}
    for item in env_list(name):
        group, _, target = item.partition("=")
        team, _, role = target.partition(":")
        if not group.strip() or not team.strip() or role not in ("viewer", "editor", "admin"):
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not group=team:role (role viewer, editor or admin)"
            )
        mapping[group.strip()] = (team.strip(), role)
    return mapping


BASE_DIR = Path(__file__).resolve().parent.parent
testing = "pytest" in sys.modules or os.environ.get("SCHEDULER_TESTING") == "true"
data_dir = Path(os.environ.get("SCHEDULER_DATA_DIR", BASE_DIR / "var"))
quickstart_key_file = data_dir / "secret_key"


# --- Core -------------------------------------------------------------------------------------
DEBUG = env_bool("DEBUG", False)
configured_database_url = os.environ.get("DATABASE_URL", "")
SECRET_KEY = fallbacks.secret_key(
    env_secret("SECRET_KEY"),
    testing=testing,
    database_url=configured_database_url,
    key_file=quickstart_key_file,
)
INSTALLED_APPS = [
    "scheduler_project.admin_apps.SchedulerAdminConfig",  # django.contrib.admin, for everyone
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_simplejwt",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc as our own static files
    "tasks",
    "notifications",
    "reviewers",
    "accounts",
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
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
if testing:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# Times to the second in the admin (scheduler_project/formats/en/formats.py).
FORMAT_MODULE_PATH = ["scheduler_project.formats"]
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", data_dir / "media"))
STORAGES = storages(os.environ.get("SCHEDULER_STORAGE") or "local", env_secret)  # uploads

# --- Database ---------------------------------------------------------------------------------
# mypy's Django plugin imports these settings and never connects; mypy ends with os._exit, which
# skips the exit handler that stops the embedded server, so it gets a URL and no server.
type_checking = "mypy" in sys.modules and not configured_database_url
database_url = (
    "postgres://127.0.0.1/scheduler"
    if type_checking
    else fallbacks.database_url(configured_database_url, data_dir=data_dir)
)
# Several hosts (`h1:5432,h2:5432/db?target_session_attrs=read-write`) fail over by libpq.
# A read replica for the API's GETs (scheduler_project/routers.py); all else uses the primary.
replica_url = env_secret("DATABASE_REPLICA_URL")
DATABASES = databases(
    database_url,
    replica_url,
    conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    application_name=os.environ.get("SCHEDULER_APPLICATION_NAME", "scheduler"),
    random_page_cost=env_float("DATABASE_RANDOM_PAGE_COST", 0.0),  # the API: 1.1 (wsgi.py)
    plan_cache_mode=os.environ.get("DATABASE_PLAN_CACHE_MODE", ""),  # API: force_generic_plan
    prepared_statements=env_bool("DATABASE_PREPARED_STATEMENTS", True),
)
if replica_url:
    DATABASE_ROUTERS = ["scheduler_project.routers.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- HTTP and security (docs/security.md says what each line defends against) -----------------
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
MIDDLEWARE = [
    # Admission control: a request that waited past the budget is answered 503 before anything
    # else runs (scheduler_project/web/admission.py).
    "scheduler_project.web.admission.AdmissionMiddleware",
    # API request count and latency by route; next, so it times every other middleware too.
    "scheduler_project.web.request_metrics.RequestMetricsMiddleware",
    # Request bodies: 413 as JSON over the limits below, before anything reads the body.
    "scheduler_project.middleware.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Times shown to a signed-in user are in their chosen zone (accounts/preferences.py).
    "accounts.preferences.ViewerZoneMiddleware",
    # Who acts, from where: the audit log's context for this request (tasks/audit.py).
    "tasks.audit.AuditContextMiddleware",
    # Each user's team memberships read once per request (accounts/access.py).
    "accounts.access.MembershipsPerRequest",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    *(["scheduler_project.routers.ReplicaReadMiddleware"] if replica_url else []),
]
# A request that waited longer than this in its gunicorn process's queue is answered 503 with
# Retry-After instead of being served late (0: never); docs/operations.md, "Admission control".
SCHEDULER_QUEUE_BUDGET_SECONDS = env_float("SCHEDULER_QUEUE_BUDGET_SECONDS", 1.0)
# An admitted request whose first database statement would start later than this after its bytes
# arrived is answered 503 with Retry-After instead (0: no deadline); same section.
SCHEDULER_REQUEST_DEADLINE_SECONDS = env_float("SCHEDULER_REQUEST_DEADLINE_SECONDS", 1.5)
# Request bodies (chunked ones too): JSON or form bodies, and executable uploads.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("SCHEDULER_MAX_JSON_BYTES", 2 * 2**20)
SCHEDULER_MAX_JSON_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE
SCHEDULER_MAX_UPLOAD_BYTES = env_int("SCHEDULER_MAX_UPLOAD_BYTES", 10 * 2**20)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 2**20
FILE_UPLOAD_HANDLERS = [
    "scheduler_project.middleware.UploadSizeLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# TLS terminated by a reverse proxy that sets X-Forwarded-Proto: secure cookies, HTTPS redirect
# (probes and scrapers on /health and /metrics stay on plain HTTP) and HSTS. Off for the quick
# start, which serves plain HTTP on 127.0.0.1.
if env_bool("SCHEDULER_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^health(/live)?$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SCHEDULER_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SCHEDULER_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SCHEDULER_HSTS_PRELOAD", False)
# Hosts/CIDRs the SSRF guard lets through (HTTP payloads and notifications).
SCHEDULER_OUTBOUND_ALLOW = env_list("SCHEDULER_OUTBOUND_ALLOW")

# --- API: DRF, tokens, OpenAPI ----------------------------------------------------------------
REST_FRAMEWORK = {
    # A service account's token (its prefix says so), else a JWT.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.token_auth.ServiceTokenAuthentication",
        "scheduler_project.auth.JWTAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "accounts.token_auth.TokenScopes",
    ],
    # orjson, and PostgreSQL-built JSON written as is (scheduler_project/web/renderers.py).
    "DEFAULT_RENDERER_CLASSES": [
        "scheduler_project.web.renderers.ORJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # JSON only (nested too deep: a 400); uploads add multipart
    # (scheduler_project.web.parsers.UPLOAD_PARSERS).
    "DEFAULT_PARSER_CLASSES": ["scheduler_project.web.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "scheduler_project.web.negotiation.ContentNegotiation",
    "DEFAULT_THROTTLE_CLASSES": ["scheduler_project.web.throttling.WriteRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": "tasks.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "tasks.api.filtering.FilterBackend",
        "tasks.api.filtering.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "scheduler_project.schema.AutoSchema",
    "EXCEPTION_HANDLER": "scheduler_project.web.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
# Writes per user (DRF rate: "<count>/<second|minute|hour|day>"; empty: no limit) → 429.
SCHEDULER_WRITE_RATE = os.environ.get("SCHEDULER_WRITE_RATE", "1200/minute")
if SCHEDULER_WRITE_RATE and not re.fullmatch(r"[0-9]+/(s|m|h|d)[a-z]*", SCHEDULER_WRITE_RATE):
    raise ImproperlyConfigured(
        f"SCHEDULER_WRITE_RATE must look like 1200/minute, not {SCHEDULER_WRITE_RATE!r}"
    )
# The key that signs the service's own tokens: 32 bytes at least (HS256's key size).
jwt_signing_key = env_secret("JWT_SIGNING_KEY") or SECRET_KEY
if len(jwt_signing_key.encode()) < 32 and not testing:
    raise ImproperlyConfigured(
        "JWT_SIGNING_KEY (or SECRET_KEY when it is unset) must be at least 32 bytes long"
    )
SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=env_int("JWT_ACCESS_TOKEN_MINUTES", 15)),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=env_int("JWT_REFRESH_TOKEN_DAYS", 7)),
    "SIGNING_KEY": jwt_signing_key,
    "ALGORITHM": "HS256",
    "UPDATE_LAST_LOGIN": False,
}
# A token's user is read once per this many seconds per API process (scheduler_project/auth.py):
# a deactivated or deleted user is refused within it. 0: on every request.
SCHEDULER_AUTH_USER_CACHE_SECONDS = env_float("SCHEDULER_AUTH_USER_CACHE_SECONDS", 5.0)
# Tokens of an external identity provider (asymmetric only), verified by scheduler_project.auth.
external_jwt = bool(env_secret("JWT_VERIFYING_KEY") or os.environ.get("JWT_JWK_URL"))
external_jwt_algorithm = os.environ.get("JWT_ALGORITHM") or "RS256"
if external_jwt and external_jwt_algorithm not in (
    *("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"),
    "EdDSA",
):
    raise ImproperlyConfigured("JWT_ALGORITHM must be an asymmetric algorithm such as RS256")
jwt_provider: dict | None = (
    {
        "ALGORITHMS": [external_jwt_algorithm],
        "VERIFYING_KEY": env_secret("JWT_VERIFYING_KEY"),
        "JWK_URL": os.environ.get("JWT_JWK_URL", ""),
        "AUDIENCE": os.environ.get("JWT_AUDIENCE") or None,
        "ISSUER": os.environ.get("JWT_ISSUER") or None,
        "USER_CLAIM": os.environ.get("JWT_USER_CLAIM") or "sub",
        "USER_FIELD": os.environ.get("JWT_USER_FIELD") or "username",
        "LEEWAY_SECONDS": env_int("JWT_LEEWAY_SECONDS", 0),
    }
    if external_jwt
    else None
)

# --- Sign-in through the company's identity provider (OpenID Connect; docs/security.md) -------
# Off unless OIDC_RP_CLIENT_ID is set; the local login keeps working beside it.
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_RP_CLIENT_ID", "")
oidc = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_RP_CLIENT_SECRET")
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_RP_SIGN_ALGO") or "RS256"
OIDC_RP_SCOPES = os.environ.get("OIDC_RP_SCOPES") or "openid email profile"
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT_SECONDS", 10.0)
OIDC_LEEWAY_SECONDS = env_int("OIDC_LEEWAY_SECONDS", 0)
# Members of this group (in the OIDC_GROUPS_CLAIM claim) are operators, others are not.
OIDC_OPERATOR_GROUP = os.environ.get("OIDC_OPERATOR_GROUP", "")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM") or "groups"
# Provider groups to teams: "group=team:role,...". The teams named here are the provider's: their
# memberships are set from the groups at every sign-in and on every provider token.
OIDC_TEAM_GROUPS = env_team_groups("OIDC_TEAM_GROUPS")
# The API takes the provider's access tokens for this audience (the client id when unset).
OIDC_API_AUDIENCE = os.environ.get("OIDC_API_AUDIENCE") or OIDC_RP_CLIENT_ID
OIDC_API_ALGORITHMS = env_list("OIDC_API_ALGORITHMS", "RS256,ES256")
LOGIN_REDIRECT_URL = "/admin/"
LOGOUT_REDIRECT_URL = "/admin/"
oidc_provider: dict | None = None
if oidc:
    missing = [
        name
        for name in (
            "OIDC_ISSUER",
            "OIDC_OP_AUTHORIZATION_ENDPOINT",
            "OIDC_OP_TOKEN_ENDPOINT",
            "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT",
        )
        if not globals()[name]
    ]
    if missing:
        raise ImproperlyConfigured(f"OIDC_RP_CLIENT_ID is set, so {', '.join(missing)} must be")
    asymmetric = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
    if OIDC_RP_SIGN_ALGO not in asymmetric or not set(OIDC_API_ALGORITHMS) <= set(asymmetric):
        raise ImproperlyConfigured(
            "OIDC_RP_SIGN_ALGO and OIDC_API_ALGORITHMS must be asymmetric algorithms such as RS256"
        )
    if external_jwt:
        raise ImproperlyConfigured("set either OIDC_* or JWT_VERIFYING_KEY/JWT_JWK_URL, not both")
    # The API's bearer tokens from the provider: users by (issuer, sub), made on first sight.
    oidc_provider = {
        "ALGORITHMS": OIDC_API_ALGORITHMS,
        "VERIFYING_KEY": "",
        "JWK_URL": OIDC_OP_JWKS_ENDPOINT,
        "AUDIENCE": OIDC_API_AUDIENCE,
        "ISSUER": OIDC_ISSUER,
        "USER_CLAIM": "sub",
        "USER_FIELD": "",  # the Identity, not a user field (accounts/identities.py)
        "LEEWAY_SECONDS": OIDC_LEEWAY_SECONDS,
        "JWKS_REFRESH_COOLDOWN_SECONDS": env_float("OIDC_JWKS_REFRESH_COOLDOWN_SECONDS", 30.0),
    }
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",  # local passwords, kept beside the provider
    *(["accounts.backends.OIDCBackend"] if oidc else []),
]
# The provider whose bearer tokens the API takes beside its own (scheduler_project/auth.py).
SCHEDULER_EXTERNAL_JWT = oidc_provider or jwt_provider
SPECTACULAR_SETTINGS = {
    "TITLE": "Scheduler API",
    "DESCRIPTION": "Schedule one-time and recurring tasks; track their runs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # /api/docs/ and /api/redoc/ load their scripts from our static files, not a CDN, so they
    # render inside a network without internet access; no badge from the online validator.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "scheduler_project.schema.document_errors",
    ],
    # One name per choice set, so the served schema is stable and `check --deploy` is quiet.
    "ENUM_NAME_OVERRIDES": {
        "TaskKindEnum": "tasks.models.Task.Kind",
        "TaskStatusEnum": "tasks.models.Task.Status",
        "RunStatusEnum": "tasks.models.Run.Status",
        "ChannelKindEnum": "notifications.models.Channel.Kind",
        "NotificationStatusEnum": "notifications.models.Notification.Status",
        "NotificationEventEnum": "notifications.models.EVENT_CHOICES",
        "EventEnum": "tasks.events.EVENTS",
        "HealthStatusEnum": "scheduler_project.web.health.HEALTH_STATUSES",
        "TeamRoleEnum": "accounts.models.Membership.Role",
        "ServiceAccountRoleEnum": "accounts.api.serializers.SERVICE_ROLES",
    },
}

# --- Tasks and the scheduler ------------------------------------------------------------------
# The scheduler materialises runs this far ahead of their time; workers claim runs this far
# ahead and start each on the dot, so a run's start does not wait for a database round trip.
TASKS_LOOKAHEAD_SECONDS = env_float("TASKS_LOOKAHEAD_SECONDS", 30.0)
# An occurrence planned later than this after its time counts as missed (misfire policy applies).
TASKS_MISFIRE_GRACE_SECONDS = env_float("TASKS_MISFIRE_GRACE_SECONDS", 60.0)
# A new task's retry policy when its request sets none (tasks.models reads them).
TASKS_DEFAULT_MAX_ATTEMPTS = env_int("TASKS_DEFAULT_MAX_ATTEMPTS", 5)
TASKS_DEFAULT_BACKOFF_BASE_SECONDS = env_float("TASKS_DEFAULT_BACKOFF_BASE_SECONDS", 2.0)
TASKS_DEFAULT_BACKOFF_CAP_SECONDS = env_float("TASKS_DEFAULT_BACKOFF_CAP_SECONDS", 600.0)
# Every role's heartbeat row in tasks_process.
TASKS_HEARTBEAT_SECONDS = env_float("TASKS_HEARTBEAT_SECONDS", 2.0)
# A worker's or reviewer's statement still unanswered after this long (a commit on a primary
# orphaned by a failover, waiting for a standby promoted meanwhile) is given up without a cancel
# and retried on a new connection (scheduler_project/postgresql/hung.py). With the heartbeat it
# must stay well below the self-stop at 70 % of REVIEWERS_RESCUE_AFTER_SECONDS; 0 disables.
TASKS_HUNG_STATEMENT_SECONDS = env_float("TASKS_HUNG_STATEMENT_SECONDS", 3.0)
SCHEDULER_HANDLER_MODULES = env_list("SCHEDULER_HANDLER_MODULES")

# --- Worker -----------------------------------------------------------------------------------
TASKS_PREFETCH_SECONDS = env_float("TASKS_PREFETCH_SECONDS", 0.5)
# A worker woken by one finished run waits this long for others still in flight, so one commit
# records them together; it delays recording, never starting.
TASKS_COALESCE_SECONDS = env_float("TASKS_COALESCE_SECONDS", 0.002)
# Runs a worker may hold claimed beyond its --concurrency, started as slots free (0 disables):
# at most this many, and only as many as its recent runs would start within
# TASKS_CLAIM_AHEAD_WAIT_SECONDS, so short runs are claimed in large batches and long runs are
# never held back from idle workers.
TASKS_CLAIM_AHEAD = env_int("TASKS_CLAIM_AHEAD", 32)
# 5 ms, not 50: a burst of millisecond runs due at once is shared between workers instead of
# held by the first to wake (docs/benchmarks.md, "Recurring mix").
TASKS_CLAIM_AHEAD_WAIT_SECONDS = env_float("TASKS_CLAIM_AHEAD_WAIT_SECONDS", 0.005)
TASKS_POLL_INTERVAL_SECONDS = env_float("TASKS_POLL_INTERVAL_SECONDS", 1.0)
TASKS_DEFAULT_TIMEOUT_SECONDS = env_float("TASKS_DEFAULT_TIMEOUT_SECONDS", 3600.0)
TASKS_OUTPUT_MAX_BYTES = env_int("TASKS_OUTPUT_MAX_BYTES", 64 * 1024)
# Executables fetched from S3, kept by content hash (tasks/storage.py).
TASKS_EXECUTABLE_CACHE_DIR = data_dir / "cache" / "executables"
TASKS_EXECUTABLE_CACHE_BYTES = env_int("TASKS_EXECUTABLE_CACHE_BYTES", 2**30)
TASKS_OWNER_MAX_RUNNING = env_int("TASKS_OWNER_MAX_RUNNING", 100)
TASKS_SHUTDOWN_GRACE_SECONDS = env_float("TASKS_SHUTDOWN_GRACE_SECONDS", 30.0)
SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY = env_bool("SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY", False)
# An executable whose processes used no CPU and wrote nothing this long is flagged zombie.
TASKS_ZOMBIE_AFTER_SECONDS = env_float("TASKS_ZOMBIE_AFTER_SECONDS", 600.0)
# `runworker --executor kubernetes` (tasks/worker/k8s_executor.py): executables as batch/v1 Jobs.
SCHEDULER_K8S_NAMESPACE = os.environ.get("SCHEDULER_K8S_NAMESPACE", "default")
# The payload's image: it needs a POSIX shell and curl or python3 to fetch the executable.
SCHEDULER_K8S_IMAGE = os.environ.get("SCHEDULER_K8S_IMAGE", "python:3.12-slim")
SCHEDULER_K8S_SERVICE_ACCOUNT = os.environ.get("SCHEDULER_K8S_SERVICE_ACCOUNT", "")
SCHEDULER_K8S_NODE_SELECTOR = env_list("SCHEDULER_K8S_NODE_SELECTOR")  # key=value,...
SCHEDULER_K8S_IMAGE_PULL_SECRETS = env_list("SCHEDULER_K8S_IMAGE_PULL_SECRETS")
SCHEDULER_K8S_TTL_SECONDS = env_int("SCHEDULER_K8S_TTL_SECONDS", 3600)
SCHEDULER_K8S_POLL_SECONDS = env_float("SCHEDULER_K8S_POLL_SECONDS", 1.0)
# A pod not running this long after its Job was made (image pull error, unschedulable) fails.
SCHEDULER_K8S_START_DEADLINE_SECONDS = env_float("SCHEDULER_K8S_START_DEADLINE_SECONDS", 300.0)

# --- Reviewer ---------------------------------------------------------------------------------
REVIEWERS_RESCUE_AFTER_SECONDS = env_float("REVIEWERS_RESCUE_AFTER_SECONDS", 10.0)
REVIEWERS_INTERVAL_SECONDS = env_float("REVIEWERS_INTERVAL_SECONDS", 1.0)
REVIEWERS_PROCESS_DEAD_AFTER_SECONDS = env_float("REVIEWERS_PROCESS_DEAD_AFTER_SECONDS", 15.0)
# Due longer than this without starting: `waiting_for_resource` (also /health and /metrics).
TASKS_START_SLA_SECONDS = env_float("TASKS_START_SLA_SECONDS", 10.0)
# Retention: finished runs (with attempts and notifications) older than this are pruned by the
# reviewer, per final status; ten years by default, as the storage sizing assumes.
retention_days = env_int("REVIEWERS_RETENTION_DAYS", 3650)
REVIEWERS_RETENTION_DAYS_BY_STATUS = {
    status: env_int(f"REVIEWERS_RETENTION_DAYS_{status.upper()}", retention_days)
    for status in ("succeeded", "failed", "cancelled", "skipped")
}
REVIEWERS_PRUNE_BATCH_SIZE = env_int("REVIEWERS_PRUNE_BATCH_SIZE", 1000)
REVIEWERS_PRUNE_INTERVAL_SECONDS = env_float("REVIEWERS_PRUNE_INTERVAL_SECONDS", 60.0)
REVIEWERS_PROCESS_RETENTION_DAYS = env_int("REVIEWERS_PROCESS_RETENTION_DAYS", 7)
REVIEWERS_SAMPLE_RETENTION_DAYS = env_int("REVIEWERS_SAMPLE_RETENTION_DAYS", 30)
# The audit log's entries older than this are pruned (docs/security.md, "Audit log"); 0 keeps
# them forever.
REVIEWERS_AUDIT_RETENTION_DAYS = env_int("REVIEWERS_AUDIT_RETENTION_DAYS", 365)

# --- Notifications (docs/notifications.md) ----------------------------------------------------
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
SCHEDULER_OUTBOUND_TIMEOUT_SECONDS = env_float("SCHEDULER_OUTBOUND_TIMEOUT_SECONDS", 10.0)
SCHEDULER_SLACK_API_URL = os.environ.get("SCHEDULER_SLACK_API_URL", "https://slack.com/api/")
# Links to runs in notifications.
SCHEDULER_PUBLIC_URL = os.environ.get("SCHEDULER_PUBLIC_URL", "http://127.0.0.1:8000")
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "scheduler@localhost")


SCHEDULER_ENCRYPTION_KEY = fallbacks.encryption_key(
    env_secret("SCHEDULER_ENCRYPTION_KEY"),
    testing=testing,
    secret_key=SECRET_KEY,
    key_file=quickstart_key_file,
)

# --- Logs, metrics, health (docs/operations.md) -----------------------------------------------
# JSON lines for log shippers in production; plain text for people (DEBUG) and tests.
LOGGING = logging_config(
    log_format=os.environ.get("LOG_FORMAT") or ("plain" if DEBUG or testing else "json"),
    level=os.environ.get("LOG_LEVEL", "INFO"),
)
SCHEDULER_METRICS_TOKEN = env_secret("SCHEDULER_METRICS_TOKEN")
# /metrics' start-lateness histogram and notification figures cover this recent window.
SCHEDULER_METRICS_WINDOW_SECONDS = env_float("SCHEDULER_METRICS_WINDOW_SECONDS", 300.0)
# /health warns (without failing) when a notification has been pending this long.
SCHEDULER_HEALTH_NOTIFICATION_WARN_SECONDS = env_float(
    "SCHEDULER_HEALTH_NOTIFICATION_WARN_SECONDS", 300.0
)
