# A finished run's summary kept on the run (tasks/sql/run_summary.sql): the column, the function
# that writes it and the triggers that call it. Adding a NULL column rewrites nothing; runs that
# finished before this migration keep no summary and are formatted as they are read (as before).

from django.db import migrations, models

from scheduler_project.sql import queries


def sql(name):
    return queries("tasks", "run_summary.sql")[name]


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0013_zombie_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="summary",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(sql("summary_function"), reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(sql("keep_summary_function"), reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(sql("summary_triggers"), reverse_sql=sql("drop")),
    ]
