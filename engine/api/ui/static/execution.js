// One execution: /ui/executions/{id}. Its status (steps, loops) is read
// from the API every second while it runs and after each event of the
// live tail, which follows the API's event stream.
"use strict";

(() => {
  const id = decodeURIComponent(location.pathname.split("/ui/executions/")[1] || "");
  const route = "/v1/executions/" + encodeURIComponent(id);
  const $ = (sel) => document.querySelector(sel);
  const cancelButton = $("#cancel");
  let current = null;
  let timer = null;
  let pending = null;

  $("#execution-id").textContent = id;

  function renderStatus(st) {
    current = st;
    document.title = "cursorflow · " + (st.playbook || id) + " · " + st.status;
    $("#playbook").textContent = st.playbook || "(unnamed)";
    const badge = $("#status");
    badge.textContent = st.status;
    badge.className = "badge " + st.status;
    badge.dataset.status = st.status;
    $("#started").textContent = CF.time(st.started_at);
    $("#duration").textContent = CF.duration(st.started_at, st.ended_at);
    $("#events").textContent = CF.number(st.events);
    $("#in-flight").textContent = CF.number((st.in_flight || []).length);
    cancelButton.disabled = st.status !== "running";
    const failure = $("#failure");
    failure.hidden = !st.error;
    failure.textContent = st.error ? "Failed" + (st.failed_step ? " in step " + st.failed_step : "") +
      (st.failed_field ? " (" + st.failed_field + ")" : "") + ": " + st.error : "";

    const steps = Object.keys(st.steps || {}).sort().map((name) =>
      CF.el("tr", { "data-step": name }, CF.el("td", { text: name }), CF.el("td", {}, CF.badge(st.steps[name]))));
    $("#steps tbody").replaceChildren(...steps);

    const loops = Object.keys(st.loops || {}).sort().map((run) => loopCard(run, st.loops[run]));
    $("#loops").replaceChildren(...loops);
    $("#no-loops").hidden = loops.length > 0;
  }

  function stat(name, value, label) {
    return CF.el("div", { class: "stat " + name }, CF.el("b", { text: value }), CF.el("span", { text: label }));
  }

  function loopCard(run, l) {
    const cursor = l.mode === "cursor";
    const done = cursor ? (l.ok || 0) : (l.done || 0);
    const card = CF.el("div", {
      class: "loop", "data-loop": run, "data-mode": l.mode, "data-finished": String(!!l.finished),
      "data-done": String(done), "data-failed": String(l.failed || 0), "data-dead": String(l.dead || 0),
      "data-frames": String(l.frames || 0), "data-rate": String(l.rate || 0),
      "data-cancelled": String(l.cancelled || 0), "data-returned": String(l.returned || 0),
    },
    CF.el("h3", {}, CF.el("span", { text: l.step + " · " + run + " · " + l.mode }),
      CF.badge(l.status || (l.finished ? "completed" : "running"))));
    const rate = (l.rate || 0) >= 10 ? Math.round(l.rate).toLocaleString() : (l.rate || 0).toFixed(1);
    const stats = CF.el("div", { class: "stats" });
    if (cursor) {
      stats.append(
        stat("done", CF.number(l.ok), "rows done"),
        stat("failed", CF.number(l.failed), "rows failed"),
        stat("dead", CF.number(l.dead), "rows dead"),
        stat("frames", CF.number(l.frames), "frames"),
        stat("inflight", CF.number(l.in_flight), "frames in flight"),
        stat("rate", rate, "rows / s"));
      // A cancel's count: rows it stopped as they ran, and rows it (or a
      // worker stopping) handed back before they started. Shown when there
      // are any, so that a cancelled loop's numbers add up to its claims.
      if (l.cancelled) stats.append(stat("cancelled", CF.number(l.cancelled), "rows cancelled"));
      if (l.returned) stats.append(stat("returned", CF.number(l.returned), "rows handed back unrun"));
    } else {
      stats.append(
        stat("done", CF.number(l.done) + " / " + CF.number(l.items), "items done"),
        stat("inflight", CF.number(l.in_flight), "in flight"),
        stat("rate", rate, "items / s"));
    }
    card.append(stats);
    // After a lost frame attempt (a worker gone) the loop does not end
    // before the source has taken back what that attempt may hold: say so,
    // or a loop whose rows are all done looks stuck while it waits.
    const hold = cursor && !l.finished && l.hold_until ? new Date(l.hold_until) : null;
    if (hold && hold > new Date()) {
      card.dataset.holdUntil = l.hold_until;
      card.append(CF.el("p", { class: "hold", text: "Held until " + hold.toLocaleTimeString() +
        ": a lost frame attempt may still hold rows in the source, so the loop does not end before then." }));
    }
    if (!cursor && l.items > 0) {
      // The total is known only for a collection loop.
      const pct = Math.min(100, (100 * (l.done || 0)) / l.items);
      const fill = CF.el("div", { style: "" });
      fill.style.width = pct.toFixed(1) + "%";
      card.append(CF.el("div", { class: "bar", role: "progressbar", "aria-valuenow": pct.toFixed(0), "aria-valuemin": "0", "aria-valuemax": "100" }, fill));
    }
    return card;
  }

  async function refresh() {
    try {
      renderStatus(await CF.api("GET", route));
      CF.showError(null);
    } catch (err) {
      CF.showError(err);
    }
    clearTimeout(timer);
    if (!current || current.status === "running") timer = setTimeout(refresh, 1000);
  }

  // soon refreshes the status at most four times a second while events
  // arrive.
  function soon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; refresh(); }, 250);
  }

  const types = ["execution.started", "execution.completed", "execution.failed", "execution.cancelled",
    "cancel.requested", "step.started", "step.skipped", "step.completed", "step.failed",
    "command.issued", "command.completed", "command.failed", "retry.scheduled",
    "loop.started", "loop.done", "frame.claimed", "frame.done"];
  const terminal = new Set(["execution.completed", "execution.failed", "execution.cancelled"]);
  const tail = $("#tail tbody");

  function follow(after) {
    const state = $("#stream-state");
    const es = new EventSource(CF.base + route + "/events/stream?after=" + after, { withCredentials: true });
    state.textContent = "(following)";
    const onEvent = (msg) => {
      let ev;
      try { ev = JSON.parse(msg.data); } catch (e) { return; }
      tail.prepend(CF.el("tr", { "data-seq": String(ev.seq), "data-type": ev.type },
        CF.el("td", { text: ev.seq }), CF.el("td", { text: CF.time(ev.time) }), CF.el("td", { class: "mono", text: ev.type }),
        CF.el("td", { text: ev.step || "" }), CF.el("td", { class: "mono", text: ev.command_id || "" })));
      while (tail.children.length > 200) tail.lastChild.remove();
      if (terminal.has(ev.type)) {
        es.close();
        state.textContent = "(ended)";
      }
      soon();
    };
    for (const t of types) es.addEventListener(t, onEvent);
    es.addEventListener("error", (e) => {
      if (e.data) CF.showError(new Error("event stream: " + e.data));
      if (es.readyState === EventSource.CLOSED) state.textContent = "(disconnected)";
    });
  }

  async function playbook() {
    try {
      const pb = await CF.api("GET", route + "/playbook");
      $("#playbook-file").textContent = pb.file || "";
      const notes = new Map();
      const loose = [];
      for (const [kind, list] of [["problem", pb.problems], ["warning", pb.warnings]]) {
        for (const p of list || []) {
          if (p.line > 0) {
            if (!notes.has(p.line)) notes.set(p.line, []);
            notes.get(p.line).push({ kind, text: (kind === "problem" ? "error: " : "warning: ") + p.message });
          } else {
            loose.push(p.message);
          }
        }
      }
      const lines = pb.source.replace(/\n$/, "").split("\n").map((text, i) => {
        const li = CF.el("li", { "data-line": String(i + 1) }, text || " ");
        for (const n of notes.get(i + 1) || []) {
          li.classList.add(n.kind);
          li.append(CF.el("span", { class: "note", text: n.text }));
        }
        return li;
      });
      $("#source").replaceChildren(...lines);
      const count = (pb.problems || []).length + (pb.warnings || []).length;
      $("#problems").textContent = count ? count + " validation finding(s), marked at their line" + (loose.length ? "; " + loose.join("; ") : "") :
        "Validates without findings.";
    } catch (err) {
      CF.showError(err);
    }
  }

  cancelButton.addEventListener("click", async () => {
    cancelButton.disabled = true;
    try {
      await CF.api("POST", route + "/cancel");
      $("#cancel-note").textContent = "cancel requested";
    } catch (err) {
      $("#cancel-note").textContent = "";
      CF.showError(err);
    }
    refresh();
  });

  (async () => {
    await refresh();
    follow(current ? Math.max(0, current.last_seq - 100) : 0);
    playbook();
  })();
})();
