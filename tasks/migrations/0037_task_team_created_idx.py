# A team's tasks newest first (task_team_created_idx): one ordered part of a member's task list
# (accounts/access.py, visible_page). It leads with team_id, so the foreign key's own index goes.
# The index is made first: no moment without one for the team's lookups.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_teams"),
        ("tasks", "0036_audit_entry_team"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="task",
            index=models.Index(fields=["team", "-created_at"], name="task_team_created_idx"),
        ),
        migrations.AlterField(
            model_name="task",
            name="team",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="accounts.team",
            ),
        ),
    ]
