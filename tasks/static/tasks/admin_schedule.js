// The admin's task form: show the schedule fields the chosen type reads (tasks/admin/forms.py
// TYPE_FIELDS and RECURRING_FIELDS), hide the others. Without JavaScript every field shows.
"use strict";
(function () {
  const TYPE_FIELDS = {
    once: ["run_at", "timezone"],
    interval: ["every", "allow_every_second"],
    daily: ["at", "business_days_only"],
    weekly: ["days", "at", "business_days_only"],
    monthly: ["day", "weekday", "week", "business_day", "at"],
    cron: ["expression", "allow_every_second"],
    rrule: ["rule", "exdates", "allow_every_second"],
  };
  const RECURRING = [
    "timezone", "start_at", "end_at", "max_runs", "jitter", "misfire", "misfire_grace", "overlap",
    "exclude", "exclude_windows",
  ];
  const ALL = [...new Set([...Object.values(TYPE_FIELDS).flat(), ...RECURRING])];

  function show() {
    const select = document.getElementById("id_schedule_type");
    if (!select) return;
    const kind = select.value;
    const shown = new Set([...(TYPE_FIELDS[kind] || []), ...(kind === "once" ? [] : RECURRING)]);
    for (const name of ALL) {
      const row = document.querySelector(".field-" + name);
      if (row) row.style.display = shown.has(name) ? "" : "none";
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    const select = document.getElementById("id_schedule_type");
    if (select) select.addEventListener("change", show);
    show();
  });
})();
