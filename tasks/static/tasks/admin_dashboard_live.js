// The dashboard's counts refresh on their own (as the run list's rows do, admin_live.js): every
// few seconds the same URL is fetched and the counts' tables swapped in. Paused while hidden.
"use strict";
(function () {
  const EVERY_MS = 10000;

  async function refresh() {
    if (document.visibilityState !== "visible") return;
    const response = await fetch(window.location.href, {
      credentials: "same-origin",
      headers: { "X-Requested-With": "admin-live" },
    });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const id of ["dashboard-live", "dashboard-keys"]) {
      const now = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (now && next) now.replaceWith(next);
    }
    document.body.dataset.liveRefreshedAt = String(Date.now());
  }

  document.addEventListener("DOMContentLoaded", function () {
    setInterval(refresh, EVERY_MS);
  });
})();
