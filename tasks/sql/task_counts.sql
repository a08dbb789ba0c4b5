-- How many tasks each user has without a team and each team has (`tasks_taskcount`), kept by
-- the database as tasks are created, deleted and moved: the default task list's `count`
-- (api_json.sql, `visible_count_of_list`) adds up a few of these rows instead of counting the
-- caller's tasks on every page. Counting 30,000 tasks of one owner was 13-18 ms of a 17-22 ms
-- page: from the table once the scheduler's updates have cleared the visibility map, and 13.6 ms
-- even from the index alone (bench/NOTEBOOK.md, "The task list's count kept by triggers").
-- A key is a team (`team_id`, `owner_id` NULL) or a user's tasks without a team (`owner_id`,
-- `team_id` NULL). Each key has up to 32 rows (`shard`): a transaction adds to the row of its
-- backend's shard, so two transactions creating tasks of one owner at once rarely wait on one
-- row (as tasks_runcounter is sharded by process, tasks/counters.py); the count is their sum.
-- Counted in the writing transaction: a page's statement sees the tasks and their count from
-- one snapshot, so the count is exact. The triggers fire as triggers do by default, not under
-- session_replication_role = replica (unlike run_summary.sql's): a logical replica and a
-- restore with triggers disabled copy tasks_taskcount's rows with the tasks', and counting
-- again would count twice. A bulk load of tasks with triggers disabled must add its counts.
-- These are the current definitions; each migration that installs them carries its own copy
-- (docs/architecture.md, "Schema changes").

-- Adds the changed keys' deltas. Statement-level for INSERT and DELETE (one upsert per
-- statement, from its transition table: a batch create of 1,000 tasks writes one row); a row
-- trigger for an UPDATE that moves a task to another owner or team, which is rare, so the
-- scheduler's frequent updates of tasks queue nothing (the trigger's WHEN is false for them:
-- a statement trigger on UPDATE with transition tables cannot name its columns, and would keep
-- a copy of every row each of those statements updates). TRUNCATE empties the counts.
-- name: count_function
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

-- Counts the tasks a statement inserts, once per statement.
-- name: count_added
CREATE OR REPLACE TRIGGER tasks_task_count_added
AFTER INSERT ON tasks_task REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION tasks_task_count()

-- Counts the tasks a statement deletes (cascades from a deleted user included).
-- name: count_removed
CREATE OR REPLACE TRIGGER tasks_task_count_removed
AFTER DELETE ON tasks_task REFERENCING OLD TABLE AS removed
FOR EACH STATEMENT EXECUTE FUNCTION tasks_task_count()

-- Moves a task's count when it changes owner or team; other updates fire nothing.
-- name: count_moved
CREATE OR REPLACE TRIGGER tasks_task_count_moved
AFTER UPDATE OF owner_id, team_id ON tasks_task
FOR EACH ROW
WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id OR OLD.team_id IS DISTINCT FROM NEW.team_id)
EXECUTE FUNCTION tasks_task_count()

-- Empties the counts with the table.
-- name: count_truncated
CREATE OR REPLACE TRIGGER tasks_task_count_truncated
AFTER TRUNCATE ON tasks_task
FOR EACH STATEMENT EXECUTE FUNCTION tasks_task_count()
