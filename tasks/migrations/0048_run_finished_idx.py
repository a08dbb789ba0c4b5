"""Finished runs by status and finish time (`run_finished_idx`, partial: the four final statuses)
take the place of `run_status_finished_idx`, the same columns over every run.

The whole index held an entry for every scheduled and running run too, and its `status` column
let the planner serve the workers' claim from it: under a snapshot held open for minutes, as
run_claimable_idx grew with the entries vacuum may not remove yet, the planner moved the
candidates' scan to that index's `scheduled` range plus a sort, which reads an entry for every
run inserted since the snapshot began (about 32,000 a scan, 67 ms of a 73 ms claim, in `python -m
bench held_snapshot`: bench/NOTEBOOK.md). Partial, no claim's condition implies its predicate, so
run_claimable_idx is the one index the claim can read. Every reader asks for a final status
(the run list filtered by one, the dashboard's finishes, /metrics' lateness, the reviewer's
samples and retention), which implies the predicate. A run gets its entry when it finishes,
not when it is planned nor when it is claimed: two index writes fewer per run.

The new index is built before the old one goes (no moment without one), CONCURRENTLY, outside a
transaction.
"""

from django.db import migrations, models

CREATE = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_finished_idx ON tasks_run (status, finished_at)
WHERE status IN ('succeeded', 'failed', 'cancelled', 'skipped')
"""
CREATE_OLD = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS run_status_finished_idx
    ON tasks_run (status, finished_at)
"""


def drop(name: str) -> str:
    return f"DROP INDEX CONCURRENTLY IF EXISTS {name}"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("tasks", "0047_task_counts")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(CREATE, reverse_sql=drop("run_finished_idx")),
                migrations.RunSQL(drop("run_status_finished_idx"), reverse_sql=CREATE_OLD),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="run", name="run_status_finished_idx"),
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(
                        condition=models.Q(
                            ("status__in", ("succeeded", "failed", "cancelled", "skipped"))
                        ),
                        fields=["status", "finished_at"],
                        name="run_finished_idx",
                    ),
                ),
            ],
        ),
    ]
