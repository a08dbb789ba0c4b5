# The audit log (tasks/audit.py): its table, and the trigger that makes it append-only.
#
# The SQL below is this migration's own, frozen: tasks/sql/audit.sql holds the current
# definitions, and a change there comes with a new migration that applies the new text.

import django.core.serializers.json
import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

APPEND_ONLY_FUNCTION = """
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
"""

APPEND_ONLY_TRIGGER = """
DROP TRIGGER IF EXISTS audit_append_only ON tasks_auditentry;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON tasks_auditentry
    FOR EACH ROW EXECUTE FUNCTION tasks_audit_append_only();
ALTER TABLE tasks_auditentry ENABLE ALWAYS TRIGGER audit_append_only;
"""

DROP = """
DROP TRIGGER IF EXISTS audit_append_only ON tasks_auditentry;
DROP FUNCTION IF EXISTS tasks_audit_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0029_every_second_opt_in_for_every_type"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditEntry",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("actor_name", models.CharField(blank=True, default="", max_length=150)),
                ("service_account", models.CharField(blank=True, default="", max_length=150)),
                ("token_id", models.CharField(blank=True, default="", max_length=64)),
                ("client_address", models.GenericIPAddressField(blank=True, null=True)),
                ("user_agent", models.TextField(blank=True, default="")),
                ("action", models.CharField(max_length=32)),
                ("object_type", models.CharField(max_length=32)),
                ("object_id", models.CharField(blank=True, default="", max_length=64)),
                ("object_name", models.TextField(blank=True, default="")),
                (
                    "changes",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        encoder=django.core.serializers.json.DjangoJSONEncoder,
                    ),
                ),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name_plural": "audit entries",
                "indexes": [
                    models.Index(fields=["at"], name="audit_at_idx"),
                    models.Index(fields=["owner", "-id"], name="audit_owner_idx"),
                    models.Index(fields=["actor_name", "-id"], name="audit_actor_idx"),
                    models.Index(fields=["object_type", "object_id"], name="audit_object_idx"),
                ],
            },
        ),
        migrations.RunSQL(APPEND_ONLY_FUNCTION, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(APPEND_ONLY_TRIGGER, reverse_sql=DROP),
    ]
