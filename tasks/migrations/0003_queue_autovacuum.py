from django.db import migrations

# tasks_run is a queue: rows change state within seconds. Analyse and vacuum it after 1 % of
# its rows changed (the default is 10-20 %), so the claim's plan and its partial index stay
# right after bursts of inserts; the table's history makes 1 % a large number of rows.
SETTINGS = (
    "autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.01, "
    "autovacuum_vacuum_threshold = 1000, autovacuum_analyze_threshold = 1000"
)


class Migration(migrations.Migration):
    dependencies = [("tasks", "0002_add_run_counters_and_samples")]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE tasks_run SET ({SETTINGS})",
            "ALTER TABLE tasks_run RESET (autovacuum_vacuum_scale_factor, "
            "autovacuum_analyze_scale_factor, autovacuum_vacuum_threshold, "
            "autovacuum_analyze_threshold)",
        ),
    ]
