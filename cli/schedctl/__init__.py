"""schedctl: the scheduler's command line. Talks to the REST API only (no Django)."""
