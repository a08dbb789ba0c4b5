"""A workflow's own notifications (`notification_workflow_idx`, partial: the rows that name a
workflow), for its deletion's cascade. Built CONCURRENTLY, outside a transaction, as the
notifications table is large and written by every outcome."""

from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY notification_workflow_idx ON notifications_notification (workflow_id)
WHERE workflow_id IS NOT NULL
"""
DROP = "DROP INDEX CONCURRENTLY IF EXISTS notification_workflow_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("notifications", "0010_workflow_overdue")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, reverse_sql=DROP)],
            state_operations=[
                migrations.AddIndex(
                    model_name="notification",
                    index=models.Index(
                        condition=models.Q(("workflow__isnull", False)),
                        fields=["workflow"],
                        name="notification_workflow_idx",
                    ),
                ),
            ],
        ),
    ]
