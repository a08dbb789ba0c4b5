# A user's console settings (accounts.Preference): the zone the admin shows times in. The table
# is created by this migration's own SQL, frozen here; the model's state follows it.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

CREATE = """
CREATE TABLE accounts_preference (
    user_id integer NOT NULL PRIMARY KEY
        REFERENCES auth_user (id) DEFERRABLE INITIALLY DEFERRED,
    timezone varchar(64) NOT NULL DEFAULT 'UTC'
);
"""

DROP = "DROP TABLE accounts_preference;"


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE, DROP)],
            state_operations=[
                migrations.CreateModel(
                    name="Preference",
                    fields=[
                        (
                            "user",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="preference",
                                serialize=False,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "timezone",
                            models.CharField(db_default="UTC", default="UTC", max_length=64),
                        ),
                    ],
                ),
            ],
        ),
    ]
