"""Every change of a task's or a run's state, one module per concern.

The API, the admin, the `ops` command, the scheduler, the worker and the reviewer all call these
functions; none of them writes a task's or a run's state itself. Each function's docstring says
what it guarantees when other processes do the same thing at the same moment. The statements
they run live in tasks/sql/*.sql.

    creation     create_task, create_tasks (batch)
    lifecycle    update_task, update_tasks (batch), pause_task, resume_task, cancel_task,
                 cancel_tasks (batch), run_now, skip_next
    run_actions  cancel_run, retry_run, cancel_running (a user's or an overlap's cancel)
    plan         plan_task, plan_due_tasks (the scheduler, and the API inline)
    claim        claim_runs, record_outcomes, record_and_claim, renew_heartbeats (the worker)
    overlap      resolve_overlaps: skip or cancel_previous at claim time
    rescue       rescue_stuck_runs, flag_starved_runs (the reviewer)
    zombie       flag, unflag: runs whose payload went quiet (the worker's watch thread)
    completion   complete_finished_tasks
    expectations review_expectations: late, too_slow, overdue (the reviewer)
    tasksets     apply_taskset, delete_taskset (taskset_plan: the plan and the drift they read)

Imports go one way: creation/lifecycle -> plan -> completion; overlap -> run_actions ->
completion; tasksets -> taskset_plan -> creation and tasksets -> lifecycle; claim, rescue,
zombie and expectations stand alone.
"""
