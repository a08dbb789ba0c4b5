#!/bin/sh
# Product lines (not tests, not migrations) that exist for concurrency keys or rate limits at a
# revision, by place: `sh bench/limit_lines.sh 39346e4` against `sh bench/limit_lines.sh HEAD`.
# Whole files by name; regions of shared files between markers that hold at both revisions.
# The claim's SQL (tasks/sql/claim.sql) is counted apart: it is the worker's hot path.
rev=${1:-HEAD}
show() { git show "$rev:$1" 2>/dev/null; }
# Lines of $1 from the first line matching $2 up to (not including) the next matching $3.
region() { show "$1" | awk -v a="$2" -v b="$3" '$0 ~ a && !on {on=1} on && $0 ~ b && !($0 ~ a) {exit} on'; }
count() { printf '%5d  %s\n' "$(wc -l | tr -d ' ')" "$1"; }

files="tasks/transitions/concurrency.py tasks/transitions/rate_limits.py tasks/transitions/limits.py
tasks/api/concurrency_views.py tasks/api/rate_limit_views.py tasks/api/limit_views.py
tasks/admin_rate_keys.py tasks/admin/limits.py
tasks/sql/concurrency.sql tasks/sql/rate_limits.sql tasks/sql/limits.sql
tasks/admission/concurrency_key.py tasks/admission/rate_key.py"
{
    for f in $files; do
        [ -n "$(show "$f")" ] && show "$f" | count "$f"
    done
    region tasks/models.py '^class (LimitKey|ConcurrencyKey)[(]' '^class Task[(]' | count "tasks/models.py (key models)"
    region tasks/models.py 'Keyed runs only' '^        []]' | count "tasks/models.py (Run's key indexes)"
    region tasks/models.py '^def claimable_by_key' '^class Run[(]' | count "tasks/models.py (claimable_by_key)"
    region tasks/api/serializers.py '^KEY_NAME' '^class TaskInputSerializer' | count "tasks/api/serializers.py (key serializers)"
    region tasks/admin.py '^@admin.register[(]ConcurrencyKey[)]' '^@admin.register[(](Task|Run|Process)[)]' | count "tasks/admin.py (ConcurrencyKeyAdmin)"
    show tasks/api/urls.py | grep -E 'concurrency|rate_limit|rate-limit|limit_views' | count "tasks/api/urls.py (routes)"
    region tasks/transitions/creation.py '^def _set_concurrency' '^def first_fire_at' | count "tasks/transitions/creation.py (_set_concurrency, _set_rate_key)"
    region scheduler_project/web/metrics.py '^# The busiest (concurrency )?keys' '^# run_running_idx' | count "scheduler_project/web/metrics.py (key SQL)"
    region scheduler_project/web/metrics.py '^(# Each kind of limit key|def key_metrics)' '^def counter_metrics' | count "scheduler_project/web/metrics.py (key gauges)"
} | tee /tmp/limit_lines.$$
awk '{s += $1} END {printf "%5d  product total, claim SQL aside\n", s}' /tmp/limit_lines.$$
rm -f /tmp/limit_lines.$$
region tasks/sql/claim.sql '^-- Concurrency keys [(]docs' '^-- What a batch|^-- name: claim$' | count "tasks/sql/claim.sql (key_ctes, rate_ctes, rate_log_ctes)"
