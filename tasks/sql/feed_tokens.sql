-- Calendar feed tokens (tasks/feed_tokens.py): one per user, made on first use, replaced by a
-- rotation in one statement.

-- Two first uses at once both insert; the constraint keeps one, and both read it back.
-- name: create
INSERT INTO tasks_calendarfeed (owner_id, token, created_at)
VALUES (%(owner)s, %(token)s, statement_timestamp())
ON CONFLICT (owner_id) DO NOTHING

-- Replace a user's calendar feed token.
-- name: rotate
INSERT INTO tasks_calendarfeed (owner_id, token, created_at)
VALUES (%(owner)s, %(token)s, statement_timestamp())
ON CONFLICT (owner_id) DO UPDATE SET token = excluded.token, created_at = excluded.created_at
RETURNING token
