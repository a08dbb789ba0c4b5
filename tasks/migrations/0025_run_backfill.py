from django.db import migrations, models

# A constant default: PostgreSQL 11 and later add the column without rewriting the table.
ADD_BACKFILL = "ALTER TABLE tasks_run ADD COLUMN backfill boolean NOT NULL DEFAULT false"
DROP_BACKFILL = "ALTER TABLE tasks_run DROP COLUMN backfill"


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0024_calendar"),
    ]

    operations = [
        migrations.RunSQL(
            ADD_BACKFILL,
            DROP_BACKFILL,
            state_operations=[
                migrations.AddField(
                    model_name="run",
                    name="backfill",
                    field=models.BooleanField(db_default=False, default=False),
                ),
            ],
        ),
    ]
