"""Indexes of tasks that most tasks have no entry in: the indexes of a task's team, concurrency
key, rate key and task set (`task_team_created_id_idx`, `task_concurrency_key_idx`,
`task_rate_key_idx`, `task_taskset_idx`) and, where pg_trgm is installed, of its dedup key
(`task_dedup_key_trgm_idx`) hold only the tasks that have one; the owner's index alone goes
(`task_owner_created_id_idx` leads with the owner and serves the same lookups).

A task's row is never updated in place (HOT): its planning steps move `next_unplanned_at` and its
end changes `status`, both in indexes or their conditions, so each such write adds an entry to
every index whose condition the new row meets. With 13 indexes a one-time task's end wrote 10
entries, two of them GIN; the same end now writes 4 (bench/NOTEBOOK.md, "Tasks written without
the entries of what they do not have"). Every reader of these indexes asks for a value (`=`, `IN`,
`LIKE`), which implies the condition, and so still reads them: foreign key checks, a team's list,
the searches.

Each new index is built before the old one goes (no moment without one), CONCURRENTLY, outside a
transaction; the team's and the dedup key's then take their old names back.
"""

from django.conf import settings
from django.db import migrations, models

CREATE = [
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_team_created_id_new
        ON tasks_task (team_id, created_at DESC, id) WHERE team_id IS NOT NULL
    """,
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_concurrency_key_idx
        ON tasks_task (concurrency_key_id) WHERE concurrency_key_id IS NOT NULL
    """,
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_rate_key_idx
        ON tasks_task (rate_key_id) WHERE rate_key_id IS NOT NULL
    """,
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_taskset_idx
        ON tasks_task (taskset_id) WHERE taskset_id IS NOT NULL
    """,
]
DROP = [
    "DROP INDEX CONCURRENTLY IF EXISTS task_team_created_id_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS tasks_task_concurrency_key_id_6c905664",
    "DROP INDEX CONCURRENTLY IF EXISTS tasks_task_rate_key_id_f934b327",
    "DROP INDEX CONCURRENTLY IF EXISTS tasks_task_taskset_id_db2ee1a8",
    "DROP INDEX CONCURRENTLY IF EXISTS tasks_task_owner_id_db3dcc3e",
    "ALTER INDEX task_team_created_id_new RENAME TO task_team_created_id_idx",
]
CREATE_OLD = [
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_team_created_id_old
        ON tasks_task (team_id, created_at DESC, id)
    """,
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_task_concurrency_key_id_6c905664"
    " ON tasks_task (concurrency_key_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_task_rate_key_id_f934b327"
    " ON tasks_task (rate_key_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_task_taskset_id_db2ee1a8"
    " ON tasks_task (taskset_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_task_owner_id_db3dcc3e ON tasks_task (owner_id)",
]
DROP_NEW = [
    "DROP INDEX CONCURRENTLY IF EXISTS task_team_created_id_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS task_concurrency_key_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS task_rate_key_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS task_taskset_idx",
    "ALTER INDEX task_team_created_id_old RENAME TO task_team_created_id_idx",
]
# The dedup key's trigram index exists only where pg_trgm is installed (migration 0044).
TRIGRAM = "SELECT EXISTS (SELECT FROM pg_class WHERE relname = 'task_dedup_key_trgm_idx')"
TRIGRAM_SWAP = [
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_dedup_key_trgm_new
        ON tasks_task USING gin ((upper(dedup_key::text)) gin_trgm_ops)
        WHERE dedup_key IS NOT NULL
    """,
    "DROP INDEX CONCURRENTLY IF EXISTS task_dedup_key_trgm_idx",
    "ALTER INDEX task_dedup_key_trgm_new RENAME TO task_dedup_key_trgm_idx",
]
TRIGRAM_BACK = [
    """
    CREATE INDEX CONCURRENTLY IF NOT EXISTS task_dedup_key_trgm_old
        ON tasks_task USING gin ((upper(dedup_key::text)) gin_trgm_ops)
    """,
    "DROP INDEX CONCURRENTLY IF EXISTS task_dedup_key_trgm_idx",
    "ALTER INDEX task_dedup_key_trgm_old RENAME TO task_dedup_key_trgm_idx",
]


def swap(statements: list[str]):
    def run(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(TRIGRAM)
            [exists] = cursor.fetchone()
        if exists:
            for statement in statements:
                schema_editor.execute(statement)

    return run


def key_field(model: str, on_delete, **options) -> models.ForeignKey:
    return models.ForeignKey(
        blank=True,
        db_index=False,
        null=True,
        on_delete=on_delete,
        to=f"tasks.{model}",
        **options,
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("tasks", "0048_run_finished_idx"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(CREATE, reverse_sql=DROP_NEW),
                migrations.RunSQL(DROP, reverse_sql=CREATE_OLD),
                migrations.RunPython(swap(TRIGRAM_SWAP), swap(TRIGRAM_BACK)),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="task", name="task_team_created_id_idx"),
                migrations.AlterField(
                    model_name="task",
                    name="concurrency_key",
                    field=key_field("concurrencykey", models.PROTECT, related_name="+"),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="rate_key",
                    field=key_field("ratekey", models.PROTECT, related_name="+"),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="taskset",
                    field=key_field("taskset", models.SET_NULL, related_name="tasks"),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("team__isnull", False)),
                        fields=["team", "-created_at", "id"],
                        name="task_team_created_id_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("concurrency_key__isnull", False)),
                        fields=["concurrency_key"],
                        name="task_concurrency_key_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("rate_key__isnull", False)),
                        fields=["rate_key"],
                        name="task_rate_key_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="task",
                    index=models.Index(
                        condition=models.Q(("taskset__isnull", False)),
                        fields=["taskset"],
                        name="task_taskset_idx",
                    ),
                ),
            ],
        ),
    ]
