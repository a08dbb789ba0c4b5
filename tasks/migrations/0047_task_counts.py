# The task counts behind the default task list's `count` (tasks/sql/task_counts.sql): the table,
# the function and triggers that keep it, and its rows from the tasks there are now. The tasks
# are locked against writes (SHARE) before they are counted, and the lock is held to this
# migration's commit, with the triggers in place from then on: no task is written between the
# count and the triggers, so the counts are exact. Reads of tasks go on meanwhile.
#
# The SQL below is this migration's own, frozen: tasks/sql/task_counts.sql holds the current
# definitions, and a change there comes with a new migration that applies the new text.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

COUNT_FUNCTION = """
CREATE OR REPLACE FUNCTION tasks_task_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owners integer[];
    teams bigint[];
    deltas bigint[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM tasks_taskcount;
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        SELECT array_agg(k.owner_id), array_agg(k.team_id), array_agg(k.n)
          INTO owners, teams, deltas
          FROM (SELECT CASE WHEN team_id IS NULL THEN owner_id END AS owner_id, team_id,
                       count(*) AS n
                  FROM added GROUP BY 1, 2) AS k;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(k.owner_id), array_agg(k.team_id), array_agg(-k.n)
          INTO owners, teams, deltas
          FROM (SELECT CASE WHEN team_id IS NULL THEN owner_id END AS owner_id, team_id,
                       count(*) AS n
                  FROM removed GROUP BY 1, 2) AS k;
    ELSE
        owners := ARRAY[CASE WHEN OLD.team_id IS NULL THEN OLD.owner_id END,
                        CASE WHEN NEW.team_id IS NULL THEN NEW.owner_id END];
        teams := ARRAY[OLD.team_id, NEW.team_id];
        deltas := ARRAY[-1, 1];
    END IF;
    INSERT INTO tasks_taskcount (team_id, owner_id, shard, value)
    SELECT c.team_id, c.owner_id, mod(pg_backend_pid(), 32), sum(c.delta)
      FROM unnest(teams, owners, deltas) AS c(team_id, owner_id, delta)
     GROUP BY c.team_id, c.owner_id
     -- A fixed row order: two transactions sharing a shard then lock its rows in one order.
     ORDER BY c.team_id, c.owner_id
    ON CONFLICT (team_id, owner_id, shard)
    DO UPDATE SET value = tasks_taskcount.value + EXCLUDED.value;
    RETURN NULL;
END
$$
"""

TRIGGERS = """
CREATE OR REPLACE TRIGGER tasks_task_count_added
AFTER INSERT ON tasks_task REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION tasks_task_count();
CREATE OR REPLACE TRIGGER tasks_task_count_removed
AFTER DELETE ON tasks_task REFERENCING OLD TABLE AS removed
FOR EACH STATEMENT EXECUTE FUNCTION tasks_task_count();
CREATE OR REPLACE TRIGGER tasks_task_count_moved
AFTER UPDATE OF owner_id, team_id ON tasks_task
FOR EACH ROW
WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.team_id IS DISTINCT FROM NEW.team_id)
EXECUTE FUNCTION tasks_task_count();
CREATE OR REPLACE TRIGGER tasks_task_count_truncated
AFTER TRUNCATE ON tasks_task
FOR EACH STATEMENT EXECUTE FUNCTION tasks_task_count();
"""

# The current tasks, as the triggers would have counted them, on shard 0.
FILL = """
LOCK TABLE tasks_task IN SHARE MODE;
INSERT INTO tasks_taskcount (team_id, owner_id, shard, value)
SELECT team_id, CASE WHEN team_id IS NULL THEN owner_id END, 0, count(*)
  FROM tasks_task
 GROUP BY 1, 2;
"""

DROP = """
DROP TRIGGER IF EXISTS tasks_task_count_added ON tasks_task;
DROP TRIGGER IF EXISTS tasks_task_count_removed ON tasks_task;
DROP TRIGGER IF EXISTS tasks_task_count_moved ON tasks_task;
DROP TRIGGER IF EXISTS tasks_task_count_truncated ON tasks_task;
DROP FUNCTION IF EXISTS tasks_task_count();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_teams"),
        ("tasks", "0046_task_created_id_idx"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskCount",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("shard", models.SmallIntegerField()),
                ("value", models.BigIntegerField(default=0)),
                (
                    "owner",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="accounts.team",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("team", "owner", "shard"),
                        name="task_count_unique",
                        nulls_distinct=False,
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("owner__isnull", True), ("team__isnull", True), _connector="OR"
                        ),
                        name="task_count_one_key",
                    ),
                ],
            },
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(COUNT_FUNCTION, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(TRIGGERS, reverse_sql=DROP),
    ]
