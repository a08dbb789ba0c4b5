"""English formats with times to the second: a scheduler's point is the second, and Django's
own "N j, Y, P" shows "8:05 a.m."."""

from __future__ import annotations

DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
TIME_FORMAT = "H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
