// The task form's live preview of the next fire times (tasks/admin/preview.py): as the schedule
// is typed, the form is posted to preview-schedule/ and the answer shown under "Next fire
// times", before the task is saved. Without JavaScript the times show once it is saved.
"use strict";
(function () {
  const FIELDS = ["schedule_type", "run_at", "every", "at", "days", "day", "expression",
    "timezone", "start_at", "end_at", "max_runs", "jitter", "misfire", "overlap"];

  function target() {
    return document.querySelector(".field-next_fire_times .readonly");
  }

  function show(items, cls) {
    const box = target();
    if (!box) return;
    const list = document.createElement("ol");
    list.className = cls;
    for (const text of items) {
      const item = document.createElement("li");
      item.textContent = text;
      list.appendChild(item);
    }
    box.replaceChildren(list);
  }

  let timer = null;
  let asked = 0;
  async function preview() {
    const form = document.getElementById("task_form");
    if (!form || !target()) return;
    const body = new FormData();
    const all = new FormData(form);
    body.append("csrfmiddlewaretoken", all.get("csrfmiddlewaretoken"));
    for (const name of FIELDS) for (const value of all.getAll(name)) body.append(name, value);
    const mine = ++asked;
    const response = await fetch(form.dataset.previewUrl, {
      method: "POST", body, credentials: "same-origin",
    });
    if (mine !== asked) return; // a later keystroke's answer is the one to show
    const answer = await response.json();
    if (answer.next_runs) show(answer.next_runs, "next-fire-times-preview");
    else show(answer.errors || ["no preview"], "next-fire-times-errors errorlist");
  }

  function later() {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(preview, 300);
  }

  document.addEventListener("DOMContentLoaded", function () {
    const form = document.getElementById("task_form");
    if (!form) return;
    form.dataset.previewUrl =
      window.location.pathname.replace(/(add|[^/]+\/change)\/$/, "") + "preview-schedule/";
    for (const name of FIELDS) {
      for (const input of form.querySelectorAll(`[name="${name}"]`)) {
        input.addEventListener("input", later);
        input.addEventListener("change", later);
      }
    }
  });
})();
