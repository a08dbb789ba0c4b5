// The admin's task and run lists refresh their rows on their own: every few seconds the same
// URL (filters, search, page) is fetched and the result table swapped in, so a run that
// finishes shows without a reload. Paused while the tab is hidden, and while any row is ticked
// or an action chosen (a swap would drop the selection the user is about to act on).
"use strict";
(function () {
  const EVERY_MS = 5000;

  function busy() {
    const form = document.getElementById("changelist-form");
    if (!form) return true;
    const action = form.querySelector("select[name=action]");
    return Boolean(form.querySelector("input.action-select:checked") || (action && action.value));
  }

  async function refresh() {
    if (document.visibilityState !== "visible" || busy()) return;
    const response = await fetch(window.location.href, {
      credentials: "same-origin",
      headers: { "X-Requested-With": "admin-live" },
    });
    if (!response.ok || busy()) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const id of ["result_list"]) {
      const now = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (now && next) now.replaceWith(next);
    }
    document.body.dataset.liveRefreshedAt = String(Date.now());
  }

  let timer = null;
  function schedule() {
    if (timer !== null) clearInterval(timer);
    timer = document.visibilityState === "visible" ? setInterval(refresh, EVERY_MS) : null;
  }
  document.addEventListener("visibilitychange", schedule);
  document.addEventListener("DOMContentLoaded", schedule);
})();
