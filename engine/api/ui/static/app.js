// Shared helpers of the cursorflow dashboard. No build step: plain
// scripts, loaded by the pages the API handler serves under /ui/.
"use strict";

const CF = (() => {
  const path = location.pathname;
  const at = path.indexOf("/ui/");
  // The handler may be mounted under a prefix (a host's /cursorflow/).
  const base = at >= 0 ? path.slice(0, at) : "";

  // api calls the API with the session cookie; a 401 sends the browser
  // to the login page.
  async function api(method, route, body) {
    const init = { method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(base + route, init);
    if (res.status === 401) {
      location.href = base + "/ui/login?next=" + encodeURIComponent(path.slice(at + 4));
      throw new Error("not logged in");
    }
    let data = {};
    try { data = await res.json(); } catch (e) { /* empty body */ }
    if (!res.ok) throw new Error(data.error || res.status + " " + res.statusText);
    return data;
  }

  // el builds an element; children are nodes or text (never HTML).
  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") n.className = v;
      else if (k === "text") n.textContent = v;
      else n.setAttribute(k, v);
    }
    for (const c of children) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return n;
  }

  function badge(status) {
    return el("span", { class: "badge " + status, text: status });
  }

  function time(t) {
    if (!t) return "";
    const d = new Date(t);
    return isNaN(d) ? "" : d.toLocaleString();
  }

  // duration between two RFC 3339 times (the second defaults to now).
  function duration(from, to) {
    if (!from) return "";
    const ms = (to ? new Date(to) : new Date()) - new Date(from);
    if (!(ms >= 0)) return "";
    const s = Math.floor(ms / 1000);
    if (s < 60) return (ms / 1000).toFixed(1) + "s";
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return (h ? h + "h " : "") + m + "m " + (s % 60) + "s";
  }

  function number(n) {
    return (n || 0).toLocaleString();
  }

  function showError(err) {
    const p = document.getElementById("error");
    if (!p) return;
    p.hidden = !err;
    p.textContent = err ? String(err.message || err) : "";
  }

  return { base, api, el, badge, time, duration, number, showError };
})();
