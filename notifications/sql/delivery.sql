-- Delivering the outbox (notifications/services.py).

-- Take a batch of due notifications to send, each leased for its send.
-- name: claim
-- The claim takes rows with SKIP LOCKED and pushes next_attempt_at a lease ahead, then commits:
-- no row lock is held during the network call, and no other deliverer takes the row while the
-- lease runs. If this process dies mid-send the row comes back when the lease ends (at least
-- once; receivers deduplicate on X-Scheduler-Delivery).
WITH picked AS (
    SELECT id FROM notifications_notification
     WHERE status = 'pending' AND next_attempt_at <= %(now)s
     ORDER BY next_attempt_at
     LIMIT %(limit)s
     FOR UPDATE SKIP LOCKED
)
UPDATE notifications_notification n
   SET attempts = n.attempts + 1, next_attempt_at = %(now)s + make_interval(secs => %(lease)s)
  FROM picked
 WHERE n.id = picked.id
RETURNING n.id, n.attempts

-- Record a send's outcome: sent, retried later, or failed.
-- name: record
-- `sent` lands whenever the row is still pending; a retry or failure only while this deliverer
-- still holds the claim (attempts unchanged), so a late result never overrides a newer claim.
UPDATE notifications_notification n
   SET status = v.status, sent_at = coalesce(v.sent_at, n.sent_at),
       next_attempt_at = v.next_attempt_at,
       last_error = CASE WHEN v.error = '' THEN n.last_error ELSE v.error END
  FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(statuses)s::text[],
              %(sent_at)s::timestamptz[], %(next_at)s::timestamptz[], %(errors)s::text[])
       AS v(id, attempts, status, sent_at, next_attempt_at, error)
 WHERE n.id = v.id AND n.status = 'pending' AND (v.status = 'sent' OR n.attempts = v.attempts)

-- Give back the claimed rows a stopping deliverer did not try.
-- name: release
-- Due again at once, their claim not counted as a try, and only while this deliverer still
-- holds the claim (attempts unchanged).
UPDATE notifications_notification n
   SET attempts = n.attempts - 1, next_attempt_at = clock_timestamp()
  FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS v(id, attempts)
 WHERE n.id = v.id AND n.status = 'pending' AND n.attempts = v.attempts

-- Seconds (database clock) until the earliest pending notification may be tried; NULL: none.
-- name: seconds_until_next_due
SELECT extract(epoch FROM min(next_attempt_at) - clock_timestamp())::float8
  FROM notifications_notification WHERE status = 'pending'
