// Strata's dashboard: reads the JSON gateway of the Admin API (api/*) that
// the daemon serving this page exposes. No framework, no CDN.
"use strict";
const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};

const tokenInput = $("token");
tokenInput.value = sessionStorage.getItem("strata-token") || "";
tokenInput.addEventListener("change", () => { sessionStorage.setItem("strata-token", tokenInput.value); refresh(); });

async function api(path, body) {
  const headers = {};
  if (tokenInput.value) headers["Authorization"] = "Bearer " + tokenInput.value;
  const opts = { headers };
  if (body !== undefined) {
    opts.method = "POST";
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch("api/" + path, opts);
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function showError(e) {
  const box = $("error");
  box.hidden = !e;
  box.textContent = e ? String(e.message || e) : "";
}

let lastState = null;

function fmtLease(s) { return s > 0 ? s.toFixed(1) + " s" : "expired"; }

function utilBar(pct) {
  const v = Math.max(0, Math.min(100, pct || 0));
  const bar = el("div", { class: "bar", title: (pct || 0).toFixed(1) + "% cpu" }, el("span"));
  bar.firstChild.style.width = v + "%";
  if (v > 85) bar.firstChild.style.background = "var(--bad)";
  return bar;
}

function renderInstance(n) {
  const li = el("li", { class: "instance", "data-instance": n.tier + "/" + n.instance });
  li.append(el("div", { class: "head" }, `${n.tier} ${n.instance} `,
    el("span", { class: "leader" }, `leader ${n.leader_id || "none"} · term ${n.term} · index ${n.state_index} · ${n.policy || ""}`)));
  const ul = el("ul");
  for (const ch of n.children) {
    const row = el("li");
    const line = el("div", { class: "child", "data-child": ch.id, "data-state": ch.state },
      el("span", { class: "name", title: ch.id }, el("span", { class: "dot" + (ch.connected ? " on" : ""), title: ch.connected ? "session open" : "no session" }), ch.id),
      el("span", { class: "badge state-" + ch.state }, ch.state),
      el("span", { class: "muted", title: "lease left" }, fmtLease(ch.lease_remaining_seconds)),
      el("span", { title: "shards" }, ch.shards + " sh"),
      utilBar((ch.utilization_pct || {}).cpu),
      ch.state === "draining"
        ? el("button", { class: "undrain", onclick: () => drain(ch.id, ch.tier, true) }, "Undrain")
        : el("button", { class: "drain", onclick: () => drain(ch.id, ch.tier, false) }, "Drain"));
    row.append(line);
    if (ch.error) row.append(el("div", { class: "muted small" }, ch.error));
    if (ch.instance) row.append(el("ul", {}, renderInstance(ch.instance)));
    ul.append(row);
  }
  li.append(ul);
  return li;
}

function renderState(st) {
  lastState = st;
  $("cluster").textContent = "Admin API " + st.addr;
  $("updated").textContent = "as of " + new Date(st.at).toLocaleTimeString();
  const tree = $("tree");
  tree.replaceChildren(el("ul", {}, ...st.tree.map(renderInstance)));
  const alerts = $("alerts");
  if (st.alerts.length === 0) alerts.replaceChildren(el("span", { class: "muted" }, "No alerts."));
  else alerts.replaceChildren(...st.alerts.map(a => el("span", { class: "alert" }, `${a.tier} ${a.instance}: ${a.alert}`)));
  // Plan targets: every tier instance of the tree.
  const sel = $("plan-instance"), cur = sel.value;
  const opts = [];
  const walk = (n) => { opts.push(n.tier + "/" + n.instance); for (const c of n.children) if (c.instance) walk(c.instance); };
  st.tree.forEach(walk);
  if (opts.join() !== Array.from(sel.options).map(o => o.value).join()) {
    sel.replaceChildren(...opts.map(o => el("option", { value: o }, o)));
    if (opts.includes(cur)) sel.value = cur;
  }
}

async function drain(child, tier, undrain) {
  try {
    const r = await api("drain", { child, tier, undrain });
    showError(null);
    addLocal(`${undrain ? "undrain" : "drain"} ${child} at ${r.parent}: ${r.state}` + (r.shards_to_move !== undefined ? `, ${r.shards_to_move} shards to move` : ""));
    refresh();
  } catch (e) { showError(e); }
}

let lastSeq = 0;
const feed = $("feed");
function addFeed(e) {
  const li = el("li", { class: "event kind-" + e.kind, "data-kind": e.kind, "data-shard": e.shard || "" },
    el("span", { class: "t" }, new Date(e.at).toLocaleTimeString()), e.message);
  feed.prepend(li);
  while (feed.children.length > 300) feed.lastChild.remove();
}
function addLocal(msg) { addFeed({ at: new Date().toISOString(), kind: "action", message: msg }); }

async function pollEvents() {
  const r = await api("events?after=" + lastSeq);
  for (const e of r.events) addFeed(e);
  lastSeq = r.last;
}

async function renderHeat() {
  const res = $("resource").value || "cpu";
  const h = await api("heat?resource=" + encodeURIComponent(res));
  const sel = $("resource");
  if (h.resources.length && h.resources.join() !== Array.from(sel.options).map(o => o.value).join()) {
    sel.replaceChildren(...h.resources.map(r => el("option", { value: r }, r)));
    sel.value = h.resources.includes(res) ? res : h.resources[0];
  }
  const W = 520, label = 120, rowH = 20, T = h.times.length, H = h.hosts.length * rowH + 22;
  const cw = T ? (W - label) / T : 0;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${res} utilization per host over time`);
  const color = (v) => {
    if (v === null) return "#f0f1f4";
    const x = Math.max(0, Math.min(1, v));
    // white → blue → red as utilization rises
    const r = x < .5 ? Math.round(255 - x * 2 * 219) : Math.round(36 + (x - .5) * 2 * 162);
    const g = x < .5 ? Math.round(255 - x * 2 * 167) : Math.round(88 - (x - .5) * 2 * 48);
    const b = x < .5 ? Math.round(255 - x * 2 * 57) : Math.round(198 - (x - .5) * 2 * 158);
    return `rgb(${r},${g},${b})`;
  };
  h.hosts.forEach((host, i) => {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", 0); t.setAttribute("y", i * rowH + 14); t.setAttribute("font-size", 11);
    t.textContent = host;
    svg.append(t);
    h.values[i].forEach((v, j) => {
      const r = document.createElementNS(ns, "rect");
      r.setAttribute("x", label + j * cw); r.setAttribute("y", i * rowH + 1);
      r.setAttribute("width", Math.max(cw, 0.5) + 0.3); r.setAttribute("height", rowH - 2);
      r.setAttribute("fill", color(v));
      const tt = document.createElementNS(ns, "title");
      tt.textContent = `${host} ${new Date(h.times[j]).toLocaleTimeString()}: ${v === null ? "no data" : (v * 100).toFixed(1) + "%"}`;
      r.append(tt);
      svg.append(r);
    });
  });
  if (T) {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", label); t.setAttribute("y", H - 6); t.setAttribute("font-size", 10); t.setAttribute("fill", "#6b7280");
    t.textContent = `${new Date(h.times[0]).toLocaleTimeString()} … ${new Date(h.times[T - 1]).toLocaleTimeString()}  (0% white · 50% blue · 100% red)`;
    svg.append(t);
  }
  $("heat").replaceChildren(svg);
}
$("resource").addEventListener("change", renderHeat);

function pathText(p) { return p.map(h => h.child ? (h.in_flight ? "→" + h.child : h.child) : "(unplaced)").join(" / "); }

$("search-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    const r = await api("shards?q=" + encodeURIComponent($("search").value));
    const rows = r.shards.map(s => el("tr", {}, el("td", {}, el("a", { onclick: () => explain(s.shard) }, s.shard)), el("td", {}, pathText(s.path))));
    $("shards").replaceChildren(el("div", { class: "muted small" }, `${r.total} shards` + (r.total > r.shards.length ? `, first ${r.shards.length}` : "")),
      el("table", {}, el("tr", {}, el("th", {}, "shard"), el("th", {}, "placement")), ...rows));
    showError(null);
  } catch (e) { showError(e); }
});

async function explain(shard) {
  try {
    const r = await api("explain?shard=" + encodeURIComponent(shard));
    const box = $("explain");
    box.hidden = false;
    const hist = (r.history || []).slice(-12).reverse().map(h => el("tr", {},
      el("td", {}, new Date(h.at).toLocaleTimeString()), el("td", {}, `${h.tier} ${h.instance}`),
      el("td", {}, `${h.from || "—"} → ${h.to}`), el("td", {}, `${h.mode}: ${h.reason}`)));
    box.replaceChildren(el("h2", {}, "Explain " + shard),
      el("div", {}, "Placed: " + pathText(r.path || [])),
      ...(r.why_not ? [el("div", { class: "error" }, "Why not: " + r.why_not)] : []),
      ...(r.quarantined || []).map(q => el("div", { class: "error" }, "Quarantined: " + q)),
      ...(r.findings || []).map(f => el("div", { class: "muted" }, "Finding: " + f)),
      el("table", {}, el("tr", {}, el("th", {}, "when"), el("th", {}, "at"), el("th", {}, "move"), el("th", {}, "why")), ...hist));
    showError(null);
  } catch (e) { showError(e); }
}

$("plan-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const [tier, instance] = ($("plan-instance").value || "/").split("/");
  const drain = $("plan-drain").value.split(",").map(s => s.trim()).filter(Boolean);
  try {
    const p = await api("plan", { tier, instance, drain });
    const rows = p.moves.map(m => el("tr", {}, el("td", {}, m.shard), el("td", {}, `${m.from || "—"} → ${m.to}`), el("td", {}, m.reason)));
    const apply = el("button", { id: "apply", onclick: async () => {
      try {
        const a = await api("apply", { addr: p.addr, token: p.token });
        addLocal(`plan ${p.token.slice(0, 8)} applied at ${tier}/${instance}: ${a.moves_committed} moves committed, ${a.moves_refused} refused`);
        apply.disabled = true;
        showError(null);
      } catch (e) { showError(e); }
    } }, `Apply ${p.moves.length} moves`);
    $("plan").replaceChildren(
      el("div", { class: "muted small" }, `token ${p.token} · state index ${p.state_index} · ${p.status}` + (p.stranded ? ` · ${p.stranded} shards stranded (apply refused)` : "")),
      el("table", {}, el("tr", {}, el("th", {}, "shard"), el("th", {}, "move"), el("th", {}, "reason")), ...rows),
      ...(p.infeasible.length ? [el("div", { class: "error" }, `${p.infeasible.length} shards infeasible: ${p.infeasible.slice(0, 10).join(", ")}`)] : []),
      apply);
    showError(null);
  } catch (e) { showError(e); }
});

async function refresh() {
  try {
    renderState(await api("state"));
    await pollEvents();
    await renderHeat();
    showError(null);
  } catch (e) { showError(e); }
}
refresh();
setInterval(refresh, 1500);
