"""The start of an audit entry's object name, case-insensitively (`audit_object_name_idx`), for
the console's audit page: its search matched any part of the object id, object name, actor
name and service account, which read the whole log twice (the page and its count), 1.1 to 2.1 s
with 200,000 entries (`python -m bench admin`). The search now matches an object's id
(audit_object_idx), an actor's name (audit_actor_idx) or the start of an object's name, this
index: `upper(object_name) LIKE upper('term%')` is a range of it (text_pattern_ops, whatever
the database's collation). The log is written once per change and never updated, so the index
costs one entry per change. Built CONCURRENTLY, outside a transaction.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY audit_object_name_idx
ON tasks_auditentry ((upper(object_name)) text_pattern_ops)
"""
DROP = "DROP INDEX CONCURRENTLY IF EXISTS audit_object_name_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0039_run_started_at_idx")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, reverse_sql=DROP)],
            state_operations=[
                migrations.AddIndex(
                    model_name="auditentry",
                    index=models.Index(
                        django.contrib.postgres.indexes.OpClass(
                            django.db.models.functions.text.Upper("object_name"),
                            name="text_pattern_ops",
                        ),
                        name="audit_object_name_idx",
                    ),
                ),
            ],
        ),
    ]
