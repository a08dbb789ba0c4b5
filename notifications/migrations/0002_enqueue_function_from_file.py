# notifications_enqueue now lives in notifications/sql/functions.sql. This migration applies that
# file's text (CREATE OR REPLACE FUNCTION, the same function 0001 created); a later change to the
# function is an edit of the file plus a new migration like this one.

from django.db import migrations

from scheduler_project.sql import queries


def function_sql():
    return queries("notifications", "functions.sql")["notifications_enqueue"]


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(function_sql(), reverse_sql=migrations.RunSQL.noop),
    ]
