-- The dashboard's sample of the queue for the previous minute, once.
-- name: record_queue_sample
-- One statement: the previous minute's row, unless a reviewer already wrote it. The NOT EXISTS
-- guard makes the common call (every few seconds, usually for a minute already sampled) a
-- single primary-key probe; ON CONFLICT settles two reviewers racing for the same minute.
-- Depth reads the claimable and running partial indexes; throughput and lateness read the
-- minute's slice of run_finished_idx (status, finished_at).
WITH m AS (SELECT date_trunc('minute', clock_timestamp()) - interval '1 minute' AS minute),
finished AS (
    -- A backfilled run is finished work but no lateness: due long ago by design (NULL, which
    -- the percentiles and max leave out).
    SELECT r.status, CASE WHEN NOT r.backfill
                          THEN greatest(0, extract(epoch FROM r.started_at - r.execute_at))::float8
                     END AS late
      FROM m, tasks_run r
     WHERE r.status IN ('succeeded', 'failed')
       AND r.finished_at >= m.minute AND r.finished_at < m.minute + interval '1 minute'
       AND NOT EXISTS (SELECT 1 FROM tasks_queuesample s WHERE s.minute = m.minute)
)
INSERT INTO tasks_queuesample (minute, due, waiting_for_resource, running, finished, failed,
                               lateness_p50, lateness_p99, lateness_max)
SELECT m.minute,
       (SELECT count(*) FROM tasks_run WHERE status IN ('scheduled', 'waiting_for_resource')
           AND execute_at <= clock_timestamp()),
       (SELECT count(*) FROM tasks_run WHERE status = 'waiting_for_resource'),
       (SELECT count(*) FROM tasks_run WHERE status = 'running'),
       (SELECT count(*) FROM finished),
       (SELECT count(*) FROM finished WHERE status = 'failed'),
       (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY late) FROM finished),
       (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY late) FROM finished),
       (SELECT max(late) FROM finished)
  FROM m
 WHERE NOT EXISTS (SELECT 1 FROM tasks_queuesample s WHERE s.minute = m.minute)
ON CONFLICT (minute) DO NOTHING
