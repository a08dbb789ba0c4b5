"""Every change of a task's or a run's state, one module per concern, named for it.

The API, the admin, the `ops` command, the scheduler, the worker and the reviewer all call these
functions; none of them writes a task's or a run's state itself. Each function's docstring says
what it guarantees when other processes do the same thing at the same moment. The statements
they run are named in tasks/sql/*.sql. docs/architecture.md ("State transitions") has the table
of modules and what each holds; a test holds the table to this folder.

Imports between the modules go one way, from a concern to those it builds on (a task set's
apply to creation and lifecycle, those to planning, planning to completion), never back: a
module that two others need sits below both.
"""
