# One image for every role: the command picks it (gunicorn, runscheduler, runworker, runreviewer).
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/venv && /opt/venv/bin/pip install -r /tmp/requirements.txt

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=scheduler_project.settings
# bubblewrap sandboxes executable payloads; curl serves the container health check.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 scheduler
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=scheduler:scheduler . /app
# collectstatic needs settings but no database: a throwaway URL and key (32 bytes at least, as
# settings.py requires) for the build step only.
RUN DATABASE_URL=postgres://build@localhost/build SECRET_KEY=build-only-not-a-secret-0123456789abcdef \
    python manage.py collectstatic --no-input -v 0
USER scheduler
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD curl -fsS http://127.0.0.1:8000/health/live || exit 1
# Migrations run as a one-off release step: `docker run IMAGE python manage.py migrate`.
# Workers, timeouts, access log: scheduler_project/gunicorn_conf.py (gthread; WEB_CONCURRENCY
# sets the worker count, one per core plus one by default, GUNICORN_THREADS the threads of each, 2).
CMD ["gunicorn", "-c", "scheduler_project/gunicorn_conf.py", "scheduler_project.wsgi"]
