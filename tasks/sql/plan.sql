-- Move planned tasks' cursors past what was planned.
-- name: advance_tasks
-- One UPDATE of every planned task's next_unplanned_at and runs_planned (tasks/transitions/plan.py).
UPDATE tasks_task t SET next_unplanned_at = v.next_unplanned_at, runs_planned = v.runs_planned,
       updated_at = %(updated_at)s
  FROM unnest(%(ids)s::uuid[], %(next)s::timestamptz[], %(planned)s::int[])
       AS v(id, next_unplanned_at, runs_planned)
 WHERE t.id = v.id
