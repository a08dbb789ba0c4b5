# A team's task notifies its team's channels: notifications_enqueue matched a channel to the
# task's owner, so a team's channel made by another member never received the task's
# notifications, and an owner's `all_tasks_events` channel of one team received their tasks of
# every team. A channel is now the task's by the `notify` validator's rule: the team's channels
# for a task of a team, the owner's channels of no team otherwise. The function text below is
# this migration's own, frozen: notifications/sql/functions.sql holds the current definition.

from django.db import migrations

ENQUEUE_FUNCTION = """
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
           AND c.all_tasks_events <> '{}' AND ev.event = ANY(c.all_tasks_events)
        UNION
        -- A task of a team: the team's channels (their team's index).
        SELECT ev.run_id, ev.task_id, ev.attempt, ev.event, ev.owner_id, ev.team_id, c.id::text
          FROM ev JOIN notifications_channel c
            ON c.team_id = ev.team_id
           AND c.all_tasks_events <> '{}' AND ev.event = ANY(c.all_tasks_events)
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
"""


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0008_audit_entry_team"),
        ("tasks", "0038_limit_keys_per_team"),
    ]

    operations = [
        migrations.RunSQL(ENQUEUE_FUNCTION, reverse_sql=migrations.RunSQL.noop),
    ]
