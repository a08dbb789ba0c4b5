-- PL/pgSQL functions: the current definitions; each migration that installs one carries its own
-- copy. To change one, edit it here and add a migration that applies the new text
-- (docs/architecture.md, "Schema changes").

-- The outbox's enqueue: a state change's events as notifications to each subscribed channel.
-- name: notifications_enqueue
-- The outbox's enqueue statement (tasks.outbox.enqueue) as a PL/pgSQL function: its
-- plan is cached per connection, so the worker's hot path does not re-plan the statement
-- on every batch (about 0.3 ms a call instead of 1 ms, nearly all of it planning). Subscribers
-- are the channels a task's `notify` names for the event (compared as text, so a malformed id
-- matches nothing instead of failing the caller's transaction) and the channels listing the
-- event in `all_tasks_events`. A channel must be the task's: for a task of a team, one of the
-- team's channels (whichever member made it); for a task of no team, one of its owner's channels
-- of no team, as the `notify` validator checks (notifications/api/serializers.py). A NULL attempt
-- means the run's current one. A NULL run is an alert about the task alone (`overdue` before
-- any run). Ids are version-7 UUIDs like tasks.ids.uuid7.
CREATE OR REPLACE FUNCTION notifications_enqueue(
    p_runs uuid[], p_tasks uuid[], p_attempts integer[], p_events text[],
    p_window double precision, p_channel text
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    inserted integer;
    queued_at timestamptz := clock_timestamp();
BEGIN
    WITH e AS (
        SELECT * FROM unnest(p_runs, p_tasks, p_attempts, p_events)
               AS e(run_id, task_id, attempt, event)
    ), ev AS (
        SELECT e.run_id, e.task_id, coalesce(e.attempt, r.attempt, 0) AS attempt, e.event,
               t.owner_id, t.team_id,
               CASE WHEN jsonb_typeof(t.notify) = 'array' THEN t.notify ELSE '[]'::jsonb END
                   AS notify
          FROM e LEFT JOIN tasks_run r ON r.id = e.run_id JOIN tasks_task t ON t.id = e.task_id
         WHERE e.run_id IS NULL OR r.id IS NOT NULL
    ), wanted AS (
        SELECT ev.run_id, ev.task_id, ev.attempt, ev.event, ev.owner_id, ev.team_id,
               lower(s.value ->> 'channel') AS channel
          FROM ev CROSS JOIN LATERAL jsonb_array_elements(ev.notify) AS s(value)
         WHERE jsonb_typeof(s.value) = 'object' AND s.value -> 'events' ? ev.event
        UNION
        -- A task of no team: its owner's channels of no team (channel_all_tasks_idx).
        SELECT ev.run_id, ev.task_id, ev.attempt, ev.event, ev.owner_id, ev.team_id, c.id::text
          FROM ev JOIN notifications_channel c
            ON ev.team_id IS NULL AND c.owner_id = ev.owner_id AND c.team_id IS NULL
           AND c.all_tasks_events <> '{{}}' AND ev.event = ANY(c.all_tasks_events)
        UNION
        -- A task of a team: the team's channels (their team's index).
        SELECT ev.run_id, ev.task_id, ev.attempt, ev.event, ev.owner_id, ev.team_id, c.id::text
          FROM ev JOIN notifications_channel c
            ON c.team_id = ev.team_id
           AND c.all_tasks_events <> '{{}}' AND ev.event = ANY(c.all_tasks_events)
    ), ins AS (
        INSERT INTO notifications_notification
               (id, channel_id, run_id, task_id, attempt, event, status, attempts,
                next_attempt_at, retry_until, last_error, created_at)
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
                   substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                   FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
               c.id, w.run_id, w.task_id, w.attempt, w.event, 'pending', 0, queued_at,
               queued_at + make_interval(secs => p_window), '', queued_at
          FROM wanted w JOIN notifications_channel c
            ON c.id::text = w.channel
           AND (CASE WHEN w.team_id IS NULL THEN c.owner_id = w.owner_id AND c.team_id IS NULL
                     ELSE c.team_id = w.team_id END)
        ON CONFLICT (run_id, attempt, event, channel_id) DO NOTHING
        RETURNING 1
    )
    SELECT count(*) INTO inserted FROM ins;
    IF inserted > 0 THEN
        PERFORM pg_notify(p_channel, '');
    END IF;
    RETURN inserted;
END
$$;

-- A workflow run's end as notifications: the trigger's function below.
-- name: workflow_run_ended_function
-- Queued by the transition of the workflow run's row from `running` to `succeeded` or `failed`
-- (tasks/sql/workflows.sql ends it in the transaction that records its last step's outcome;
-- the row is locked there, so the transition, and this, happen once per end). Subscribers are
-- the channels the workflow's `notify` names for the event (compared as text, as
-- notifications_enqueue does) and its owner's channels listing the event in
-- `all_tasks_events`, each of the owner's. The row names the workflow run, no run or task;
-- `attempt` is 0 and `retry_until` NULL (the deliverer's window from `created_at`: the
-- database has no setting to read).
CREATE OR REPLACE FUNCTION notifications_workflow_run_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_event text := 'workflow_' || NEW.status;
    v_owner integer;
    v_notify jsonb;
    inserted integer;
    queued_at timestamptz := clock_timestamp();
BEGIN
    SELECT w.owner_id,
           CASE WHEN jsonb_typeof(w.notify) = 'array' THEN w.notify ELSE '[]'::jsonb END
      INTO v_owner, v_notify
      FROM tasks_workflow w WHERE w.id = NEW.workflow_id;
    WITH wanted AS (
        SELECT lower(s.value ->> 'channel') AS channel
          FROM jsonb_array_elements(v_notify) AS s(value)
         WHERE jsonb_typeof(s.value) = 'object' AND s.value -> 'events' ? v_event
        UNION
        SELECT c.id::text FROM notifications_channel c
         WHERE c.owner_id = v_owner AND c.all_tasks_events <> '{{}}'
           AND v_event = ANY(c.all_tasks_events)
    ), ins AS (
        INSERT INTO notifications_notification
               (id, channel_id, workflow_run_id, attempt, event, status, attempts,
                next_attempt_at, last_error, created_at)
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
                   substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                   FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
               c.id, NEW.id, 0, v_event, 'pending', 0, queued_at, '', queued_at
          FROM wanted w JOIN notifications_channel c
            ON c.owner_id = v_owner AND c.id::text = w.channel
        RETURNING 1
    )
    SELECT count(*) INTO inserted FROM ins;
    IF inserted > 0 THEN
        PERFORM pg_notify('scheduler_notification', '');
    END IF;
    RETURN NULL;
END
$$;

-- AFTER ... FOR EACH ROW on a workflow run's end, `succeeded` or `failed` (a cancel queues
-- nothing); the WHEN is evaluated without calling the function.
-- name: workflow_run_ended_trigger
DROP TRIGGER IF EXISTS workflow_run_ended_notifies ON tasks_workflowrun;
CREATE TRIGGER workflow_run_ended_notifies AFTER UPDATE OF status ON tasks_workflowrun
    FOR EACH ROW
    WHEN (OLD.status = 'running' AND NEW.status IN ('succeeded', 'failed'))
    EXECUTE FUNCTION notifications_workflow_run_ended();

-- A workflow's lapse as a notification: the trigger's function below.
-- name: workflow_overdue_function
-- Queued by the reviewer's `workflow_overdue` pass (tasks/sql/expect.sql) when it moves the
-- workflow's `overdue_from` to a lapse not alerted yet (the row is locked there, so this
-- happens once per lapse). Subscribers are those of a workflow run's end (above) for the event
-- `workflow_overdue`. The row names the workflow alone; `attempt` 0, `retry_until` NULL.
CREATE OR REPLACE FUNCTION notifications_workflow_overdue() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_notify jsonb := CASE WHEN jsonb_typeof(NEW.notify) = 'array' THEN NEW.notify
                           ELSE '[]'::jsonb END;
    inserted integer;
    queued_at timestamptz := clock_timestamp();
BEGIN
    WITH wanted AS (
        SELECT lower(s.value ->> 'channel') AS channel
          FROM jsonb_array_elements(v_notify) AS s(value)
         WHERE jsonb_typeof(s.value) = 'object' AND s.value -> 'events' ? 'workflow_overdue'
        UNION
        SELECT c.id::text FROM notifications_channel c
         WHERE c.owner_id = NEW.owner_id AND c.all_tasks_events <> '{{}}'
           AND 'workflow_overdue' = ANY(c.all_tasks_events)
    ), ins AS (
        INSERT INTO notifications_notification
               (id, channel_id, workflow_id, attempt, event, status, attempts,
                next_attempt_at, last_error, created_at)
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
                   substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                   FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
               c.id, NEW.id, 0, 'workflow_overdue', 'pending', 0, queued_at, '', queued_at
          FROM wanted w JOIN notifications_channel c
            ON c.owner_id = NEW.owner_id AND c.id::text = w.channel
        RETURNING 1
    )
    SELECT count(*) INTO inserted FROM ins;
    IF inserted > 0 THEN
        PERFORM pg_notify('scheduler_notification', '');
    END IF;
    RETURN NULL;
END
$$;

-- AFTER ... FOR EACH ROW when a workflow turns `overdue` for a new lapse.
-- name: workflow_overdue_trigger
DROP TRIGGER IF EXISTS workflow_overdue_notifies ON tasks_workflow;
CREATE TRIGGER workflow_overdue_notifies AFTER UPDATE OF overdue_from ON tasks_workflow
    FOR EACH ROW
    WHEN (NEW.health = 'overdue' AND NEW.overdue_from IS DISTINCT FROM OLD.overdue_from)
    EXECUTE FUNCTION notifications_workflow_overdue();
