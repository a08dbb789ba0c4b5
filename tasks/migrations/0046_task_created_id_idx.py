"""The task list's order in its indexes: `task_owner_created_id_idx` (owner_id, created_at DESC,
id) INCLUDE (team_id) and `task_team_created_id_idx` (team_id, created_at DESC, id) take the
places of `task_owner_created_idx` and `task_team_created_idx`, which lacked the id the list
orders by last (tasks/api/filtering.py, OrderingFilter). Tasks created together (a task set's
apply, an import: one `created_at`) tie, and a page of the list read and sorted the whole tie
group: 30,000 tasks of one owner for every page of 50 (`python -m bench day`, its profile: the
task list was PostgreSQL's largest cost, bench/NOTEBOOK.md). With the id in the index a page is
the first rows of one ordered index read whatever the ties. The owner's index carries team_id
so that the list of a user's own tasks (`team_id IS NULL`) and its count need no heap read
where the visibility map allows.

Each new index is built before the old one goes (no moment without one), CONCURRENTLY, outside
a transaction. Same number of indexes on tasks_task as before: an update that is not HOT (the
scheduler's, which sets the indexed next_unplanned_at) writes no more entries than it did.
"""

from django.db import migrations, models

CREATE_OWNER = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS task_owner_created_id_idx
    ON tasks_task (owner_id, created_at DESC, id) INCLUDE (team_id)
"""
CREATE_TEAM = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS task_team_created_id_idx
    ON tasks_task (team_id, created_at DESC, id)
"""
CREATE_OLD_OWNER = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS task_owner_created_idx
    ON tasks_task (owner_id, created_at DESC)
"""
CREATE_OLD_TEAM = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS task_team_created_idx
    ON tasks_task (team_id, created_at DESC)
"""


def drop(name: str) -> str:
    return f"DROP INDEX CONCURRENTLY IF EXISTS {name}"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0045_run_failed_task_idx")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(CREATE_OWNER, reverse_sql=drop("task_owner_created_id_idx")),
                migrations.RunSQL(drop("task_owner_created_idx"), reverse_sql=CREATE_OLD_OWNER),
                migrations.RunSQL(CREATE_TEAM, reverse_sql=drop("task_team_created_id_idx")),
                migrations.RunSQL(drop("task_team_created_idx"), reverse_sql=CREATE_OLD_TEAM),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="task", name="task_owner_created_idx"),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        fields=["owner", "-created_at", "id"],
                        include=["team"],
                        name="task_owner_created_id_idx",
                    ),
                ),
                migrations.RemoveIndex(model_name="task", name="task_team_created_idx"),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        fields=["team", "-created_at", "id"], name="task_team_created_id_idx"
                    ),
                ),
            ],
        ),
    ]
