import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0034_workflow_notify"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="taskset",
            name="workflow_keys",
            field=models.JSONField(blank=True, db_default={}, default=dict),
        ),
        migrations.AddField(
            model_name="workflow",
            name="taskset",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="workflows",
                to="tasks.taskset",
            ),
        ),
        migrations.AddField(
            model_name="workflow",
            name="taskset_entry",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workflow",
            name="taskset_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddConstraint(
            model_name="workflow",
            constraint=models.UniqueConstraint(
                condition=models.Q(("taskset__isnull", False)),
                fields=("taskset", "taskset_key"),
                name="workflow_unique_taskset_key",
            ),
        ),
    ]
