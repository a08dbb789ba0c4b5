# The audit log's `team` (tasks/migrations/0036_audit_entry_team.py) for the existing entries
# of this app's objects: a channel's own team, a notification's task's. Filled with the
# append-only trigger disabled inside this migration's transaction, as 0033 does and for the
# same reasons; the SQL below is this migration's own, frozen.

from django.db import migrations

FILL_TEAMS = """
ALTER TABLE tasks_auditentry DISABLE TRIGGER audit_append_only;
WITH teams (object_type, object_id, team_id) AS (
    SELECT 'channel', c.id::text, c.team_id
      FROM notifications_channel c WHERE c.team_id IS NOT NULL
    UNION ALL
    SELECT 'notification', n.id::text, t.team_id
      FROM notifications_notification n JOIN tasks_task t ON t.id = n.task_id
     WHERE t.team_id IS NOT NULL
       AND n.id::text IN (
           SELECT object_id FROM tasks_auditentry WHERE object_type = 'notification'
       )
)
UPDATE tasks_auditentry e SET team_id = teams.team_id
  FROM teams
 WHERE e.team_id IS NULL AND e.object_id <> ''
   AND e.object_type = teams.object_type AND e.object_id = teams.object_id;
ALTER TABLE tasks_auditentry ENABLE ALWAYS TRIGGER audit_append_only;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0007_workflow_events"),
        ("tasks", "0036_audit_entry_team"),
    ]

    operations = [
        migrations.RunSQL(FILL_TEAMS, reverse_sql=migrations.RunSQL.noop),
    ]
