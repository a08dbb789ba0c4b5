# The audit log's `team`: the object's team when the entry was recorded, so that a team's
# members read the team's log (tasks/audit_log.py, visible_entries). Existing entries take the
# current team of their object where it still exists: a task's, a run's (its task's), a
# calendar's, a limit key's, a task set's (notifications/migrations/0007 does the channels' and
# notifications'). Bulk entries and a calendar feed's have none.
#
# The append-only trigger refuses every UPDATE: the fill runs with it disabled, inside this
# migration's transaction. ALTER TABLE holds the table's ACCESS EXCLUSIVE lock until the commit,
# so no other session writes or reads the log meanwhile, and the trigger is enabled ALWAYS again
# (as tasks/sql/audit.sql defines it) before anyone can. The SQL below is this migration's own,
# frozen.

import django.db.models.deletion
from django.db import migrations, models

FILL_TEAMS = """
ALTER TABLE tasks_auditentry DISABLE TRIGGER audit_append_only;
WITH teams (object_type, object_id, team_id) AS (
    SELECT 'task', t.id::text, t.team_id FROM tasks_task t WHERE t.team_id IS NOT NULL
    UNION ALL
    SELECT 'run', r.id::text, t.team_id
      FROM tasks_run r JOIN tasks_task t ON t.id = r.task_id
     WHERE t.team_id IS NOT NULL
       AND r.id::text IN (SELECT object_id FROM tasks_auditentry WHERE object_type = 'run')
    UNION ALL
    SELECT 'calendar', c.id::text, c.team_id FROM tasks_calendar c WHERE c.team_id IS NOT NULL
    UNION ALL
    SELECT 'concurrency_key', k.id::text, k.team_id
      FROM tasks_concurrencykey k WHERE k.team_id IS NOT NULL
    UNION ALL
    SELECT 'rate_key', k.id::text, k.team_id FROM tasks_ratekey k WHERE k.team_id IS NOT NULL
    UNION ALL
    SELECT 'taskset', s.id::text, s.team_id FROM tasks_taskset s WHERE s.team_id IS NOT NULL
)
UPDATE tasks_auditentry e SET team_id = teams.team_id
  FROM teams
 WHERE e.team_id IS NULL AND e.object_id <> ''
   AND e.object_type = teams.object_type AND e.object_id = teams.object_id;
ALTER TABLE tasks_auditentry ENABLE ALWAYS TRIGGER audit_append_only;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_teams"),
        ("tasks", "0035_workflow_taskset"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="team",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="accounts.team",
            ),
        ),
        migrations.AddIndex(
            model_name="auditentry",
            index=models.Index(fields=["team", "-id"], name="audit_team_idx"),
        ),
        migrations.RunSQL(FILL_TEAMS, reverse_sql=migrations.RunSQL.noop),
    ]
