-- The audit log is append-only (docs/security.md, "Audit log"): a trigger that no statement
-- can forget refuses every UPDATE of an entry and every DELETE but retention's. The reviewer's
-- pruning (reviewers/retention.py) declares the retention it applies, in days, in the
-- transaction's own setting `scheduler.audit_retention_days` (set_config(..., true), which is
-- SET LOCAL), and only entries older than that many days may then go. These are the current
-- definitions; each migration that installs them carries its own copy. To change one, edit it
-- here and add a migration that applies the new text (docs/architecture.md, "Schema changes").

-- Refuses the row's UPDATE, and its DELETE unless the transaction declared a retention of at
-- least a day that the row is past. An unset or empty setting refuses; a malformed one fails.
-- name: append_only_function
CREATE OR REPLACE FUNCTION tasks_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kept_days integer := nullif(current_setting('scheduler.audit_retention_days', true), '')::integer;
BEGIN
    IF TG_OP = 'DELETE' AND kept_days >= 1
       AND OLD.at < transaction_timestamp() - make_interval(days => kept_days) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % of entry % refused', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$$

-- The trigger, enabled ALWAYS so that a session in replica mode is refused too.
-- name: append_only_trigger
DROP TRIGGER IF EXISTS audit_append_only ON tasks_auditentry;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON tasks_auditentry
    FOR EACH ROW EXECUTE FUNCTION tasks_audit_append_only();
ALTER TABLE tasks_auditentry ENABLE ALWAYS TRIGGER audit_append_only;

-- The entries of one change, all by one actor: one row per element of the JSON array
-- `entries` (tasks/audit.py `record_all`), in its order: a batch of 1,000 tasks is one
-- statement of about 20 ms (the ORM's bulk_create of as many rows took about 250 ms, as long as
-- creating the tasks). Each entry's `changes` is JSON text, as DjangoJSONEncoder wrote it. `at`
-- is the column's default, the statement's time.
-- name: insert
INSERT INTO tasks_auditentry (
    actor_id, actor_name, service_account, token_id, client_address, user_agent,
    action, object_type, object_id, object_name, owner_id, team_id, changes
)
SELECT %(actor_id)s, %(actor_name)s, %(service_account)s, %(token_id)s, %(client_address)s::inet,
       %(user_agent)s, e.action, e.object_type, e.object_id, e.object_name, e.owner_id,
       e.team_id, e.changes::jsonb
  FROM ROWS FROM (
           jsonb_to_recordset(%(entries)s::jsonb)
               AS (action text, object_type text, object_id text, object_name text,
                   owner_id integer, team_id bigint, changes text)
       ) WITH ORDINALITY AS e(action, object_type, object_id, object_name, owner_id, team_id,
                              changes, n)
 ORDER BY e.n

-- Undoes the two above (a migration's reverse).
-- name: drop
DROP TRIGGER IF EXISTS audit_append_only ON tasks_auditentry;
DROP FUNCTION IF EXISTS tasks_audit_append_only();
