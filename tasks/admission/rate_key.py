"""Rate key: a due run whose key's sliding window already holds `rate_limit` starts in the last
`per_seconds`, an exact log on the key row (tasks/sql/claim.sql `rate_ctes`; the reviewer:
tasks/sql/limits.sql `hold_rate_limited`). A start admitted ahead of its due time could not keep
the window, so rate-keyed runs are never prefetched."""

from __future__ import annotations

from tasks.admission.wait import Wait

WAIT = Wait(
    reason="rate key",
    kind="rate_key",
    decided="claim, reviewer",
    released="the claim once the key's window frees",
    words="rate limit {key}: {limit} per {per} s reached, next start at {at}",
)
