-- Queue state changes' events in the outbox.
-- name: enqueue
-- One statement whatever the number of events (tasks/outbox.py); the work is done by
-- the function notifications_enqueue (functions.sql).
SELECT notifications_enqueue(%(runs)s::uuid[], %(tasks)s::uuid[], %(attempts)s::int[], %(events)s::text[], %(window)s, %(channel)s)
