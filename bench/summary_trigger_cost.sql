-- The run summary trigger's cost per row (docs/benchmarks.md, "API against its floor"):
--   psql -h 127.0.0.1 -U postgres -f bench/summary_trigger_cost.sql <a migrated database with runs>
-- Two copies of tasks_run, one with the triggers of tasks/sql/run_summary.sql; each is claimed
-- (-> running) and finished (-> succeeded) by one UPDATE of every row, timed. Dropped after.
\set ON_ERROR_STOP on
DROP TABLE IF EXISTS bench_runs_plain, bench_runs_summary;
CREATE TABLE bench_runs_plain AS SELECT * FROM tasks_run;
CREATE TABLE bench_runs_summary AS SELECT * FROM tasks_run;
UPDATE bench_runs_plain SET summary = NULL, status = 'scheduled', finished_at = NULL;
UPDATE bench_runs_summary SET summary = NULL, status = 'scheduled', finished_at = NULL;
VACUUM FULL bench_runs_plain;
VACUUM FULL bench_runs_summary;
CREATE TRIGGER s_update BEFORE UPDATE OF status, attempt, scheduled_at, started_at, finished_at,
    summary ON bench_runs_summary FOR EACH ROW
    WHEN ((NEW.status IN ('succeeded', 'failed', 'cancelled', 'skipped') OR NEW.summary IS NOT NULL)
          AND (NEW.status, NEW.attempt, NEW.scheduled_at, NEW.started_at, NEW.finished_at,
               NEW.summary)
              IS DISTINCT FROM (OLD.status, OLD.attempt, OLD.scheduled_at, OLD.started_at,
                                OLD.finished_at, OLD.summary))
    EXECUTE FUNCTION tasks_run_keep_summary();
SELECT count(*) AS rows FROM bench_runs_plain;
\timing on
UPDATE bench_runs_plain SET status = 'running', attempt = attempt + 1, started_at = now();
UPDATE bench_runs_summary SET status = 'running', attempt = attempt + 1, started_at = now();
UPDATE bench_runs_plain SET status = 'succeeded', finished_at = now();
UPDATE bench_runs_summary SET status = 'succeeded', finished_at = now();
\timing off
DROP TABLE bench_runs_plain, bench_runs_summary;
