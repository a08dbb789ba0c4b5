"""A user's own tasks without a team, newest first (`task_own_created_idx`): the first part of
the task list (tasks/sql/api_json.sql `visible_page_of_list`, `visible_count_of_list`). The
owner's index (`task_owner_created_idx`) holds their team tasks too, so `team_id IS NULL` was a
heap read per row: the part's page and count are now index-only reads, in the list's order
(`created_at DESC, id`), for a member of teams and for a user in none (bench/NOTEBOOK.md, "A
team member's task list in one statement").

Partial (`team_id IS NULL`): a team's tasks are read by `task_team_created_idx`. Built
CONCURRENTLY, outside a transaction.
"""

from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY task_own_created_idx ON tasks_task (owner_id, created_at DESC, id)
WHERE team_id IS NULL
"""
DROP = "DROP INDEX CONCURRENTLY IF EXISTS task_own_created_idx"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0045_run_failed_task_idx")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, reverse_sql=DROP)],
            state_operations=[
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("team__isnull", True)),
                        fields=["owner", "-created_at", "id"],
                        name="task_own_created_idx",
                    ),
                ),
            ],
        ),
    ]
