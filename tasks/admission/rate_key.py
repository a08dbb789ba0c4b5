"""Rate key: a due run whose key's sliding window already holds `rate_limit` starts in the last
`per_seconds` (tasks/sql/claim.sql `rate_ctes`, an exact log on the key row). The claim marks
the candidates it holds back; the reviewer marks the due runs the claims' scan skipped
(tasks/sql/limits.sql, `hold_rate_limited`). Released by the claim once the window frees
(`held_until`); a start admitted ahead of its due time could not keep the window, so rate-keyed
runs are never prefetched."""

from __future__ import annotations

from tasks.admission.wait import Wait

KIND = "rate_key"
WORDS = "rate limit {key}: {limit} per {per} s reached, next start at {at}"

WAIT = Wait(
    reason="rate key",
    kind=KIND,
    decided="claim, reviewer",
    released="the claim once the key's window frees",
    words=WORDS,
)
