"""Web plumbing every app's API shares, one module per concern of a request (its errors, how it
is parsed, negotiated, throttled, rendered and counted), and the project-wide views over all
apps (/health, /metrics)."""
