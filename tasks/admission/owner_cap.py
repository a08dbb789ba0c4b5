"""Owner cap: a due run whose owner already has TASKS_OWNER_MAX_RUNNING runs running (as the
claim's snapshot counts them, and within the claim's batch). The claim's candidates skip the
owner's runs, which stay `scheduled` and unmarked; the claim after one of the owner's runs ends
starts them."""

from __future__ import annotations

from tasks.admission.wait import Wait

WAIT = Wait(
    reason="owner cap",
    kind="",
    decided="claim",
    released="the claim after a run of the owner ends",
    words="",
)
