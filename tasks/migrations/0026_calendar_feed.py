"""tasks_calendarfeed: each user's calendar feed token (docs/security.md, "Calendar feeds").

The token is looked up by equality only, so its unique constraint's index is the only one: no
`varchar_pattern_ops` index for LIKE as Django would add."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

CREATE = """
CREATE TABLE tasks_calendarfeed (
    owner_id integer NOT NULL PRIMARY KEY
        CONSTRAINT tasks_calendarfeed_owner_id_fk_auth_user_id
        REFERENCES auth_user (id) DEFERRABLE INITIALLY DEFERRED,
    token varchar(64) NOT NULL CONSTRAINT tasks_calendarfeed_token_key UNIQUE,
    created_at timestamp with time zone NOT NULL
);
"""

DROP = "DROP TABLE tasks_calendarfeed;"


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0025_run_backfill"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL(
            CREATE,
            DROP,
            state_operations=[
                migrations.CreateModel(
                    name="CalendarFeed",
                    fields=[
                        (
                            "owner",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="+",
                                serialize=False,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        ("token", models.CharField(max_length=64, unique=True)),
                        ("created_at", models.DateTimeField()),
                    ],
                ),
            ],
        ),
    ]
