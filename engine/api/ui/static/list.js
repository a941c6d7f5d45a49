// The executions list: /ui/ (?status= filters).
"use strict";

(() => {
  const filter = document.getElementById("filter");
  const body = document.querySelector("#executions tbody");
  const params = new URLSearchParams(location.search);
  filter.value = params.get("status") || "";

  async function refresh() {
    const q = new URLSearchParams({ limit: "200" });
    if (filter.value) q.set("status", filter.value);
    try {
      const data = await CF.api("GET", "/v1/executions?" + q);
      const rows = data.executions.map((x) =>
        CF.el("tr", { "data-execution": x.execution_id, "data-status": x.status },
          CF.el("td", { class: "mono" }, CF.el("a", { href: CF.base + "/ui/executions/" + encodeURIComponent(x.execution_id), text: x.execution_id })),
          CF.el("td", { class: "playbook", text: x.playbook }),
          CF.el("td", { class: "status" }, CF.badge(x.status)),
          CF.el("td", { class: "started", text: CF.time(x.started_at) }),
          CF.el("td", { class: "duration", text: CF.duration(x.started_at, x.ended_at) }),
          CF.el("td", { class: "events", text: CF.number(x.events) })));
      body.replaceChildren(...rows);
      document.getElementById("empty").hidden = rows.length > 0;
      document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
      CF.showError(null);
    } catch (err) {
      CF.showError(err);
    }
  }

  filter.addEventListener("change", () => {
    const p = new URLSearchParams(location.search);
    if (filter.value) p.set("status", filter.value); else p.delete("status");
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
    refresh();
  });
  refresh();
  setInterval(refresh, 2000);
})();
