from django.db import migrations

# The every-second opt-in now covers intervals and rrules too (tasks/schedule_fields.py): a task
# stored before it that fires every second gets the flag, so its schedule read back through the
# API can be sent again (as 0018 did for cron). An rrule's text is canonical: parts in a fixed
# order, values as numbers.
KEEP_EVERY_SECOND = r"""
UPDATE tasks_task
   SET schedule = schedule || '{"allow_every_second": true}'::jsonb
 WHERE NOT schedule ? 'allow_every_second'
   AND ((schedule ->> 'type' = 'interval' AND schedule ->> 'every' IN ('1', '1.0'))
        OR (schedule ->> 'type' = 'rrule'
            AND schedule ->> 'rule' ~ '(^|;)FREQ=SECONDLY(;|$)'
            AND schedule ->> 'rule' !~ '(^|;)INTERVAL=([2-9]|[1-9][0-9]+)(;|$)'
            AND schedule ->> 'rule' !~ '(^|;)BYSECOND='))
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0028_run_wait_and_skip_kind"),
    ]

    operations = [migrations.RunSQL(KEEP_EVERY_SECOND, migrations.RunSQL.noop)]
