-- A finished run's summary, as a task's `runs` shows it, kept on the run by the database
-- (`tasks_run.summary`): a task list page carries 50 tasks x 20 runs, and formatting their
-- 3,000 times on every read was about half of that page's time (docs/benchmarks.md, "API against its floor").
-- A run's summary changes only when it finishes (or is retried and finishes again), so it is
-- written then, once, by a trigger that no statement can forget: NULL while the run is not
-- finished (those few are formatted as they are read). These are the current definitions; each
-- migration that installs them carries its own copy. To change one, edit it here and add a
-- migration that applies the new text (docs/architecture.md, "Schema changes").

-- The summary's JSON text: RunSummarySerializer's fields in its order, each time written as
-- DRF's DateTimeField writes it (tasks/api/json_sql.py iso_sql: ISO 8601 in UTC, microseconds
-- only when not zero, "Z"). Concatenated, not json_build_object: no value needs escaping (a
-- uuid, a status name, an integer, formatted times), and it took a fifth less time. STABLE
-- (to_char is) so that the planner inlines it into the list's statement.
-- name: summary_function
CREATE OR REPLACE FUNCTION tasks_run_summary(
    p_id uuid, p_scheduled_at timestamptz, p_status text, p_attempt integer,
    p_started_at timestamptz, p_finished_at timestamptz
) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT '{{"id":"' || p_id
    || '","scheduled_at":"' || replace(to_char(p_scheduled_at AT TIME ZONE 'UTC',
                                               'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z')
    || '","status":"' || p_status || '","attempt":' || p_attempt
    || ',"started_at":' || coalesce('"' || replace(to_char(p_started_at AT TIME ZONE 'UTC',
                                   'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z') || '"', 'null')
    || ',"finished_at":' || coalesce('"' || replace(to_char(p_finished_at AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z') || '"', 'null')
    || '}}'
$$

-- The trigger function that keeps a finished run's summary on its row.
-- name: keep_summary_function
CREATE OR REPLACE FUNCTION tasks_run_keep_summary() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.summary := CASE WHEN NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
                        THEN tasks_run_summary(NEW.id, NEW.scheduled_at, NEW.status, NEW.attempt,
                                               NEW.started_at, NEW.finished_at) END;
    RETURN NEW;
END
$$

-- The triggers' WHEN clauses are evaluated without calling the function: a claim (a run not
-- finished, with no summary, starting) pays about 2 us for them and a heartbeat nothing; only a
-- run that finishes, or a finished one that changes (a dead-lettered run retried), pays for its
-- summary, about 9 us (bench/summary_trigger_cost.sql). ENABLE ALWAYS: the summary is derived
-- data, kept under session_replication_role = replica too (a bulk load, a logical replica).
-- name: summary_triggers
DROP TRIGGER IF EXISTS run_summary_on_insert ON tasks_run;
DROP TRIGGER IF EXISTS run_summary_on_update ON tasks_run;
CREATE TRIGGER run_summary_on_insert BEFORE INSERT ON tasks_run FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped') OR NEW.summary IS NOT NULL)
    EXECUTE FUNCTION tasks_run_keep_summary();
CREATE TRIGGER run_summary_on_update
    BEFORE UPDATE OF status, attempt, scheduled_at, started_at, finished_at, summary ON tasks_run
    FOR EACH ROW
    WHEN ((NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
           OR NEW.summary IS NOT NULL)
          AND (NEW.status, NEW.attempt, NEW.scheduled_at, NEW.started_at, NEW.finished_at,
               NEW.summary)
              IS DISTINCT FROM (OLD.status, OLD.attempt, OLD.scheduled_at, OLD.started_at,
                                OLD.finished_at, OLD.summary))
    EXECUTE FUNCTION tasks_run_keep_summary();
ALTER TABLE tasks_run ENABLE ALWAYS TRIGGER run_summary_on_insert;
ALTER TABLE tasks_run ENABLE ALWAYS TRIGGER run_summary_on_update;

-- Remove the summary's triggers and functions (a migration's reverse).
-- name: drop
DROP TRIGGER IF EXISTS run_summary_on_insert ON tasks_run;
DROP TRIGGER IF EXISTS run_summary_on_update ON tasks_run;
DROP FUNCTION IF EXISTS tasks_run_keep_summary();
DROP FUNCTION IF EXISTS tasks_run_summary(uuid, timestamptz, text, integer, timestamptz,
                                          timestamptz);
