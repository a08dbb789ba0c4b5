from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0041_task_not_active_idx"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflow",
            name="priority",
            field=models.SmallIntegerField(db_default=5, default=5),
        ),
        migrations.AddConstraint(
            model_name="workflow",
            constraint=models.CheckConstraint(
                condition=models.Q(("priority__gte", 0), ("priority__lte", 9)),
                name="workflow_priority_range",
            ),
        ),
    ]
