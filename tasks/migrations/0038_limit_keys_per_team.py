# A team's concurrency and rate keys are the team's: unique by (team, name), whichever member
# made them, and an owner's name is unique among their own keys (without a team) only
# (tasks/transitions/limits.py resolves a team's task's keys in its team). Two members' keys of
# one name in one team, made between 0032 (teams, the same release) and this one, would make
# the new constraint fail: rename one first.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_teams"),
        ("tasks", "0037_task_team_created_idx"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="concurrencykey",
            name="concurrency_key_unique_owner_name",
        ),
        migrations.RemoveConstraint(
            model_name="ratekey",
            name="rate_key_unique_owner_name",
        ),
        migrations.AddConstraint(
            model_name="concurrencykey",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", False), ("team__isnull", True)),
                fields=("owner", "name"),
                name="concurrency_key_unique_owner_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="concurrencykey",
            constraint=models.UniqueConstraint(
                condition=models.Q(("team__isnull", False)),
                fields=("team", "name"),
                name="concurrency_key_unique_team_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="ratekey",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", False), ("team__isnull", True)),
                fields=("owner", "name"),
                name="rate_key_unique_owner_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="ratekey",
            constraint=models.UniqueConstraint(
                condition=models.Q(("team__isnull", False)),
                fields=("team", "name"),
                name="rate_key_unique_team_name",
            ),
        ),
    ]
