// The admin's task form: show the schedule fields the chosen type reads (tasks/admin_forms.py
// TYPE_FIELDS and RECURRING_FIELDS), hide the others. Without JavaScript every field shows.
"use strict";
(function () {
  const TYPE_FIELDS = {
    once: ["run_at", "timezone"],
    interval: ["every"],
    daily: ["at"],
    weekly: ["days", "at"],
    monthly: ["day", "at"],
    cron: ["expression"],
  };
  const RECURRING = ["timezone", "start_at", "end_at", "max_runs", "jitter", "misfire", "overlap"];
  const ALL = ["run_at", "every", "at", "days", "day", "expression", ...RECURRING];

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
