-- Many new rows of a model in one statement: the rows are one parameter, a JSON array of objects
-- keyed by column (tasks/transitions/inserts.py makes it from the model instances), read as the
-- table's own row type, so each value takes its column's type and the statement names no
-- column. Every row names every column (a key left out would be NULL, not the column's
-- default); tests/tasks/transitions/test_inserts.py holds the table's columns equal to the
-- model's. The ORM's bulk_create of 1,000 tasks and their runs cost the API more CPU than
-- everything else of the batch route: a prepared value per field and row, an array dumped per
-- column.

-- New tasks (creation.create_tasks).
-- name: insert_tasks
INSERT INTO tasks_task SELECT * FROM jsonb_populate_recordset(NULL::tasks_task, %(rows)s::jsonb)

-- New runs of them (creation.create_tasks).
-- name: insert_runs
INSERT INTO tasks_run SELECT * FROM jsonb_populate_recordset(NULL::tasks_run, %(rows)s::jsonb)
