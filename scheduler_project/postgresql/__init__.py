"""Django's PostgreSQL backend, with a primary connection that turned read-only seen as broken."""
