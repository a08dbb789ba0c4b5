"""Web plumbing every app's API shares: errors, renderers, parsers, content negotiation,
throttling, request metrics, and the project-wide /health and /metrics views."""
