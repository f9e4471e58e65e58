// DRAForge dashboard: plain DOM, no inline code (the CSP forbids it), no external requests.
"use strict";

const $ = (id) => document.getElementById(id);

// el builds an element; strings become text nodes (never HTML).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function table(caption, headers, rows) {
  if (!rows.length) return el("p", { class: "meta" }, "No " + caption.toLowerCase() + ".");
  return el("table", {},
    el("caption", { class: "meta" }, caption + " (" + rows.length + ")"),
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) => i === 0 ? el("th", { scope: "row" }, c) : el("td", {}, c))))));
}

function badge(text, level) {
  return el("span", { class: "badge badge-" + level }, text);
}

function setBadge(id, text, level) {
  const b = $(id);
  b.textContent = text;
  b.className = "badge badge-" + level;
  b.dataset.level = level;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-cache" });
  let body = null;
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = body && body.error ? body.error.code + ": " + body.error.message : "HTTP " + r.status;
    const err = new Error(msg);
    err.status = r.status;
    err.body = body;
    throw err;
  }
  return body;
}

function showError(msg) {
  const e = $("error");
  e.textContent = msg || "";
  e.hidden = !msg;
}

const state = { claims: [], explainTarget: "", occ: { q: "", state: "", groupBy: "", offset: 0, node: "" }, podTarget: "" };
const occPageSize = 100; // rows in the DOM at once, whatever the node count
const stripMax = 128;    // cells drawn per node; the rest is counted

function poolLevel(h) { return h === "Healthy" ? "ok" : h === "Degraded" ? "warn" : h === "Empty" ? "unknown" : "bad"; }
function claimLevel(s) { return s === "Pending" ? "warn" : s === "Deleting" ? "unknown" : "ok"; }

function renderSummary(s) {
  const c = s.counts || {};
  const items = [["SimulatedDevicePools", c.simulatedDevicePools], ["DRA pools", c.pools], ["Devices", c.devices],
    ["Allocated devices", c.allocatedDevices], ["Tainted devices", c.taintedDevices], ["Claims", c.claims],
    ["Pending claims", (c.claimStates || {}).Pending || 0], ["DeviceClasses", c.deviceClasses], ["Nodes", c.nodes], ["Pods", c.pods]];
  $("counts").replaceChildren(...items.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, v === undefined ? "–" : v))));
  const d = s.doctor || {};
  const sum = d.summary || {};
  let level = "ok", text = "Doctor: " + (sum.PASS || 0) + " pass";
  if (!d.factsGatheredAt) { level = "unknown"; text = "Doctor: facts pending"; }
  if ((sum.WARN || 0) > 0) { level = "warn"; text = "Doctor: " + sum.WARN + " warn"; }
  if ((sum.FAIL || 0) > 0) { level = "bad"; text = "Doctor: " + sum.FAIL + " fail"; }
  setBadge("badge-doctor", text, level);
  $("doctor-summary").replaceChildren(
    badge("PASS " + (sum.PASS || 0), "ok"), " ", badge("WARN " + (sum.WARN || 0), (sum.WARN || 0) ? "warn" : "unknown"), " ",
    badge("FAIL " + (sum.FAIL || 0), (sum.FAIL || 0) ? "bad" : "unknown"), " ", badge("SKIP " + (sum.SKIP || 0), "unknown"),
    (d.failing || []).length ? el("span", {}, " failing: " + d.failing.join(", ")) : "");
  $("snapshot-version").textContent = s.version;
  $("snapshot-time").textContent = s.builtAt ? new Date(s.builtAt).toLocaleTimeString() : "–";
  $("version").textContent = "draforge " + (s.serverVersion || "");
}

function renderPools(pools) {
  $("pools").replaceChildren(table("Pools", ["Pool", "Driver", "Node", "SimulatedDevicePool", "Generation", "Slices", "Devices", "Allocated", "Health", "Consistency"],
    pools.map((p) => [p.pool, p.driver, p.node || "(multi-node)", p.sdp || "–", p.generation, p.slices + "/" + p.resourceSliceCount,
      p.deviceCount, p.allocatedDevices, badge(p.health, poolLevel(p.health)),
      p.consistent ? badge("consistent", "ok") : badge((p.problems || []).join("; "), "bad")])));
}

function renderDevices(devs) {
  $("devices").replaceChildren(table("Devices", ["Device", "Pool", "Node", "Health", "Taints", "Attributes", "Allocated to"],
    devs.map((d) => [d.name, d.driver + "/" + d.pool, d.node || "–", badge(d.healthy ? "healthy" : "tainted", d.healthy ? "ok" : "bad"),
      (d.taints || []).join(", ") || "–",
      Object.entries(d.attributes || {}).map(([k, v]) => k + "=" + v).join(", ") || "–",
      (d.allocatedTo || []).join(", ") || "–"])));
}

function renderClaims(claims) {
  state.claims = claims;
  $("claims").replaceChildren(table("Claims", ["Claim", "Namespace", "State", "Requests", "Allocations", "Node", "Pods", "Explain"],
    claims.map((c) => [c.name, c.namespace, badge(c.state, claimLevel(c.state)),
      (c.requests || []).map((r) => r.name + " (" + r.alternatives.map((a) => a.deviceClassName + (a.count ? " ×" + a.count : "")).join(" | ") + ")").join(", "),
      (c.allocations || []).map((a) => a.request + "=" + a.pool + "/" + a.device).join(", ") || "–",
      c.node || "–", (c.pods || []).join(", ") || "–",
      el("button", { type: "button", "data-explain": c.namespace + "/" + c.name }, "Explain")])));
  const sel = $("explain-claim");
  const keep = sel.value || state.explainTarget;
  sel.replaceChildren(...claims.map((c) => el("option", { value: c.namespace + "/" + c.name }, c.namespace + "/" + c.name + " (" + c.state + ")")));
  if (keep && claims.some((c) => c.namespace + "/" + c.name === keep)) sel.value = keep;
  else {
    const pending = claims.find((c) => c.state === "Pending");
    if (pending) sel.value = pending.namespace + "/" + pending.name;
  }
}

const graphColumns = ["SimulatedDevicePool", "ResourcePool", "Node", "Device", "ResourceClaim", "DeviceClass", "Pod"];

function renderGraph(g) {
  const nodes = g.nodes || [], edges = g.edges || [];
  const cols = graphColumns.map(() => []);
  for (const n of nodes) {
    const i = graphColumns.indexOf(n.kind);
    cols[i < 0 ? cols.length - 1 : i].push(n);
  }
  const colW = 190, rowH = 30, boxW = 170, boxH = 22;
  const pos = {};
  cols.forEach((col, ci) => col.forEach((n, ri) => { pos[n.id] = { x: 10 + ci * colW, y: 30 + ri * rowH }; }));
  const height = 40 + Math.max(1, ...cols.map((c) => c.length)) * rowH;
  const root = svg("svg", { viewBox: "0 0 " + (20 + graphColumns.length * colW) + " " + height, role: "img", "aria-labelledby": "graph-title" },
    svg("title", { id: "graph-title" }, "Graph of " + nodes.length + " objects and " + edges.length + " relations"));
  graphColumns.forEach((k, ci) => root.append(svg("text", { x: 10 + ci * colW, y: 16 }, k)));
  for (const e of edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    const [l, r] = a.x <= b.x ? [a, b] : [b, a];
    root.append(svg("path", { class: "edge", d: "M" + (l.x + boxW) + "," + (l.y + boxH / 2) + " C" + (l.x + boxW + 20) + "," + (l.y + boxH / 2) + " " + (r.x - 20) + "," + (r.y + boxH / 2) + " " + r.x + "," + (r.y + boxH / 2) }));
  }
  for (const n of nodes) {
    const p = pos[n.id];
    const label = (n.namespace ? n.namespace + "/" : "") + n.name;
    const short = label.length > 26 ? "…" + label.slice(-25) : label;
    root.append(svg("g", { class: "node" + (n.missing ? " missing" : "") },
      svg("title", {}, n.kind + " " + label + (n.missing ? " (missing)" : "")),
      svg("rect", { x: p.x, y: p.y, width: boxW, height: boxH, rx: 4 }),
      svg("text", { x: p.x + 6, y: p.y + 15 }, short)));
  }
  $("graph").replaceChildren(root);
  const name = {};
  for (const n of nodes) name[n.id] = n.kind + " " + (n.namespace ? n.namespace + "/" : "") + n.name;
  $("graph-list").replaceChildren(table("Relations", ["From", "Relation", "To"], edges.map((e) => [name[e.from] || e.from, e.kind, name[e.to] || e.to])));
}

function renderDoctor(rep) {
  const results = rep.results || [];
  const level = (s) => s === "PASS" ? "ok" : s === "WARN" ? "warn" : s === "FAIL" ? "bad" : "unknown";
  $("doctor").replaceChildren(
    el("p", { class: "meta" }, rep.factsGatheredAt ? "Facts gathered " + new Date(rep.factsGatheredAt).toLocaleTimeString() : "Facts not gathered yet"),
    ...results.map((r) => el("article", { class: "check", "aria-labelledby": "check-" + r.id },
      el("h3", { id: "check-" + r.id }, badge(r.status, level(r.status)), " ", r.id + " " + r.name),
      el("p", {}, r.message),
      (r.evidence || []).length ? el("ul", {}, r.evidence.map((e) => el("li", {}, el("code", {}, e)))) : null,
      r.remediation ? el("p", {}, el("strong", {}, "Remediation: "), r.remediation) : null)));
}

// maxDeviceRows is how many device lines "Show devices" renders per request; the rest are
// counted (draforge explain --devices lists them all).
const maxDeviceRows = 200;

// explain shows the summary first, as `draforge explain` does: per request the devices excluded
// counted by reason, nodes grouped by why they do not fit. The per-device lists (a megabyte at
// 1,000 nodes) are fetched only when asked for.
async function explain(key, withDevices) {
  if (!key) { $("explain").replaceChildren(el("p", { class: "meta" }, "No claim selected.")); return; }
  const started = performance.now();
  // A refresh of the same claim keeps the devices shown if they were.
  if (withDevices === undefined) withDevices = key === state.explainTarget && state.explainDevices;
  state.explainTarget = key;
  state.explainDevices = !!withDevices;
  const [ns, name] = key.split("/");
  let r;
  try {
    r = await getJSON("/api/explain/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name) + (withDevices ? "" : "?devices=false"));
  } catch (e) {
    $("explain").replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
    return;
  }
  const ex = r.explanation || {};
  const parts = [el("h3", {}, key + " ", badge(r.claim.state, claimLevel(r.claim.state))), el("p", { id: "explain-summary" }, r.summary)];
  for (const req of ex.requests || []) {
    parts.push(el("h4", {}, "Request " + req.name + " (class " + req.deviceClass + ", " + req.mode + (req.count ? " " + req.count : "") + "): " +
      req.matching + " matching, " + req.available + " available"));
    if (!req.classFound) parts.push(el("p", { class: "error" }, "ClassNotFound: DeviceClass " + req.deviceClass + " does not exist"));
    const excluded = Object.entries(req.excluded || {}).sort((a, b) => b[1] - a[1]);
    if (excluded.length) parts.push(el("p", { class: "explain-excluded" }, "Excluded: " + excluded.map(([code, n]) => code + " " + n).join(", ")));
    if (withDevices) {
      const devs = req.devices || [];
      parts.push(table("Devices for " + req.name, ["Device", "Node", "Available", "Reasons"],
        devs.slice(0, maxDeviceRows).map((d) => [d.driver + "/" + d.pool + "/" + d.device, d.node || "(any node)", badge(d.available ? "yes" : "no", d.available ? "ok" : "bad"),
          (d.reasons || []).map((x) => x.code + ": " + x.message).join("; ") || "–"])));
      if (devs.length > maxDeviceRows) parts.push(el("p", { class: "meta" }, (devs.length - maxDeviceRows) + " more devices: draforge explain --devices claim/" + name + " -n " + ns + " lists them all"));
    }
  }
  if (!withDevices && (ex.requests || []).length) {
    parts.push(el("button", { type: "button", id: "explain-devices", "data-explain-devices": key }, "Show devices"));
  }
  const groups = nodeGroups(ex.nodes || []);
  if (groups.length) {
    parts.push(el("h4", {}, "Nodes (" + (ex.nodes || []).length + ")"));
    parts.push(table("Node groups", ["Verdict", "Nodes", "Why"], groups.map((g) => [badge(g.fits ? "fits" : "does not fit", g.fits ? "ok" : "bad"),
      g.nodes.length + ": " + g.nodes.slice(0, 3).join(", ") + (g.nodes.length > 3 ? " and " + (g.nodes.length - 3) + " more" : ""), g.summary])));
  }
  if ((ex.remedies || []).length) parts.push(el("h4", {}, "Remedies"), el("ul", {}, ex.remedies.map((x) => el("li", {}, x))));
  $("explain").replaceChildren(...parts);
  if (location.hash.startsWith("#explain")) history.replaceState(null, "", "#explain" + explainHash());
  document.body.dataset.explainMs = String(Math.round(performance.now() - started));
}

// nodeGroups groups nodes by verdict and reason: fitting nodes first, then the largest groups
// (the grouping of `draforge explain`).
function nodeGroups(nodes) {
  const byKey = new Map();
  for (const n of nodes) {
    const k = (n.fits ? "1" : "0") + "\u0000" + n.summary;
    if (!byKey.has(k)) byKey.set(k, { fits: !!n.fits, summary: n.summary, nodes: [] });
    byKey.get(k).nodes.push(n.node);
  }
  return [...byKey.values()].sort((a, b) => (b.fits - a.fits) || (b.nodes.length - a.nodes.length));
}

// Nodes × devices: the server filters and pages (/api/occupancy), so the DOM holds one page of
// rows however many nodes there are; a node's devices load only when it is selected.
function strip(cells) {
  const shown = cells.slice(0, stripMax);
  const e = el("span", { class: "strip", role: "img", "aria-label": cells.length + " devices" },
    ...Array.from(shown, (c) => el("span", { class: "cell cell-" + c })));
  if (cells.length > stripMax) e.append(" +" + (cells.length - stripMax));
  return e;
}

async function loadOccupancy() {
  const o = state.occ;
  const qs = new URLSearchParams({ offset: o.offset, limit: occPageSize });
  if (o.q) qs.set("q", o.q);
  if (o.state) qs.set("state", o.state);
  if (o.groupBy) qs.set("groupBy", o.groupBy);
  const p = await getJSON("/api/occupancy?" + qs);
  groupOptions(p.topologyKeys || [], o.groupBy);
  if (p.total > 0 && p.offset >= p.total) { o.offset = 0; return loadOccupancy(); }
  $("occ-totals").textContent = p.total + " of " + p.nodes + " nodes · " + p.devices + " devices: " + p.allocated + " allocated, " +
    p.free + " free, " + p.tainted + " tainted";
  $("occ-range").textContent = p.total ? "nodes " + (p.offset + 1) + "–" + (p.offset + p.rows.length) + " of " + p.total : "no nodes match";
  $("occ-prev").disabled = p.offset === 0;
  $("occ-next").disabled = p.offset + p.rows.length >= p.total;
  const nodeTable = (caption, rows) => table(caption, ["Node", "Devices", "Allocated", "Free", "Tainted", "Pools", "Occupancy"],
    rows.map((r) => [el("button", { type: "button", class: "link", "data-node": r.node || "-" }, r.node || "(not bound to a node)"),
      r.devices, r.allocated, r.free, r.tainted, (r.pools || []).join(", ") || "–", strip(r.strip || "")]));
  if (!p.groupBy) {
    $("occupancy").replaceChildren(nodeTable("Nodes", p.rows));
  } else {
    // One table per topology domain on this page, captioned with the domain's totals over
    // every matching node (the rows arrive ordered by domain).
    const tables = [];
    for (const g of p.groups || []) {
      const rows = p.rows.filter((r) => ((r.labels || {})[p.groupBy] || "") === g.value);
      if (!rows.length) continue;
      tables.push(nodeTable((g.value ? p.groupBy + " = " + g.value : "without " + p.groupBy) + ": " + g.nodes + " nodes, " +
        g.devices + " devices: " + g.allocated + " allocated, " + g.free + " free, " + g.tainted + " tainted", rows));
    }
    $("occupancy").replaceChildren(...tables);
  }
  if (o.node) await loadNode(o.node);
  document.body.dataset.occupancyMs = Math.round(performance.now());
  document.body.dataset.occupancy = "true";
}

// groupOptions offers the topology label keys the nodes carry (and the one chosen, even if no
// node carries it any more).
function groupOptions(keys, chosen) {
  const sel = $("occ-group"), want = ["", ...new Set([...keys, ...(chosen ? [chosen] : [])])];
  const have = Array.from(sel.options, (o) => o.value);
  if (have.join("\n") !== want.join("\n")) {
    sel.replaceChildren(...want.map((k) => el("option", { value: k }, k || "no grouping")));
  }
  sel.value = chosen;
}

async function loadNode(node) {
  state.occ.node = node;
  let d;
  try {
    d = await getJSON("/api/occupancy/" + encodeURIComponent(node));
  } catch (e) {
    $("occ-node").replaceChildren(el("p", { class: "error", role: "alert" }, node + ": " + e.message));
    return;
  }
  $("occ-node").replaceChildren(
    el("h3", { id: "occ-node-title" }, "Node " + (d.node || "(devices not bound to a node)") + ": " + d.allocated + "/" + d.devices + " allocated, " + d.tainted + " tainted"),
    table("Devices on " + (d.node || "no single node"), ["Device", "Pool", "State", "Taints", "Allocated to"],
      d.deviceList.map((x) => [x.name, x.driver + "/" + x.pool,
        badge((x.allocatedTo || []).length ? "allocated" : x.healthy ? "free" : "tainted", (x.allocatedTo || []).length ? "ok" : x.healthy ? "unknown" : "bad"),
        (x.taints || []).join(", ") || "–", (x.allocatedTo || []).join(", ") || "–"])),
    table("Pods on " + (d.node || "no single node"), ["Pod", "Phase", "Devices"],
      d.pods.map((x) => [x.namespace + "/" + x.name, x.phase, (x.devices || []).map((v) => v.claim + ":" + v.pool + "/" + v.device).join(", ") || "–"])));
}

function podLevel(p) { return p === "Running" || p === "Succeeded" ? "ok" : p === "Pending" ? "warn" : "bad"; }

function renderPods(pods) {
  $("pods").replaceChildren(table("Pods", ["Pod", "Phase", "Node", "Claims", "Devices", "Scheduler", "Explain"],
    pods.map((p) => [p.namespace + "/" + p.name, badge(p.phase, podLevel(p.phase)), p.node || "–",
      (p.claims || []).join(", ") + (p.pendingClaims ? " (" + p.pendingClaims + " pending)" : ""),
      (p.devices || []).map((d) => d.claim + ":" + d.pool + "/" + d.device + (d.node ? " on " + d.node : "")).join(", ") || "–",
      p.unschedulable || "–",
      el("button", { type: "button", "data-explain-pod": p.namespace + "/" + p.name }, "Explain")])));
}

async function explainPod(key) {
  state.podTarget = key;
  if (location.hash.startsWith("#pods")) history.replaceState(null, "", "#pods?explain=" + encodeURIComponent(key));
  const [ns, name] = key.split("/");
  let r;
  try {
    r = await getJSON("/api/explain/pod/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name));
  } catch (e) {
    $("pod-explain").replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
    return;
  }
  const parts = [el("h3", {}, "Pod " + key + " ", badge(r.phase, podLevel(r.phase))), el("p", { id: "pod-explain-summary" }, r.summary)];
  if (r.scheduler) parts.push(el("p", {}, el("strong", {}, "Scheduler: "), (r.scheduler.reason ? r.scheduler.reason + ": " : "") + r.scheduler.message));
  if (r.gang) parts.push(gangPart(r.gang));
  if ((r.devices || []).length) parts.push(table("Devices held", ["Claim", "Request", "Device", "Node"],
    r.devices.map((d) => [d.claim, d.request, d.driver + "/" + d.pool + "/" + d.device, d.node || "(any node)"])));
  parts.push(table("Claims", ["Entry", "Source", "Claim", "State", "Summary"],
    (r.claims || []).map((c) => [c.name, c.source + " " + c.sourceName, c.claim || "–",
      c.explanation ? badge(c.explanation.claim.state, claimLevel(c.explanation.claim.state)) : badge("missing", "bad"),
      c.problem || (c.explanation ? c.explanation.summary : "–")])));
  $("pod-explain").replaceChildren(...parts);
}

// gangPart shows the pod's PodGroup: its policy, members placed, kube-scheduler's verdict on
// the group (why the rest wait) and the claims made for it.
function gangPart(g) {
  const head = el("p", { id: "pod-explain-gang" }, el("strong", {}, "Gang: "));
  if (g.unread) head.append("PodGroup " + g.podGroup + " (PodGroups were not read)");
  else if (!g.found) head.append("PodGroup " + g.podGroup + " does not exist: kube-scheduler places no member until it does");
  else head.append("PodGroup " + g.podGroup + " (" + g.policy + (g.minCount ? ", minCount " + g.minCount : "") + "): " +
    g.members + " pods, " + g.placed + " placed");
  const parts = [head];
  if (g.scheduling) parts.push(el("p", {}, el("strong", {}, "Group scheduling: "),
    g.scheduling.status + (g.scheduling.reason ? " " + g.scheduling.reason : "") + (g.scheduling.message ? ": " + g.scheduling.message : "")));
  if ((g.claims || []).length) parts.push(table("Claims of the group", ["Entry", "Claim"], g.claims.map((c) => [c.name, c.claim || "–"])));
  return el("div", {}, ...parts);
}

async function checkReady() {
  try {
    const r = await fetch("/readyz", { cache: "no-store" });
    const body = await r.json();
    const level = body.status === "ready" ? "ok" : body.status === "degraded" ? "warn" : "bad";
    setBadge("badge-ready", "Readiness: " + body.status + (body.reason && body.reason !== "ok" ? " (" + body.reason + ")" : ""), level);
  } catch (e) {
    setBadge("badge-ready", "Readiness: unreachable", "bad");
  }
}

async function loadAll() {
  const jobs = [
    ["/api/summary", renderSummary], ["/api/pools", renderPools], ["/api/devices", renderDevices],
    ["/api/claims", renderClaims], ["/api/graph", renderGraph], ["/api/doctor", renderDoctor], ["/api/pods", renderPods],
  ];
  // The nodes view loads on its own: it never waits for the big lists, the graph or an explain.
  const occ = loadOccupancy().catch((e) => "/api/occupancy: " + e.message);
  const results = await Promise.allSettled(jobs.map(([p]) => getJSON(p)));
  const errs = [];
  results.forEach((res, i) => {
    if (res.status === "fulfilled") jobs[i][1](res.value);
    else errs.push(jobs[i][0] + ": " + res.reason.message);
  });
  const occErr = await occ;
  if (occErr) errs.push(occErr);
  if (state.podTarget) await explainPod(state.podTarget);
  showError(errs.join(" · "));
  if (state.explainTarget || $("explain-claim").value) await explain($("explain-claim").value);
  document.body.dataset.loaded = "true";
}

let reloadTimer = null;
function scheduleReload() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(loadAll, 150);
}

let es = null, backoff = 1000;
function connect() {
  setBadge("badge-stream", "Stream: connecting", "unknown");
  es = new EventSource("/api/stream");
  es.addEventListener("open", () => { backoff = 1000; setBadge("badge-stream", "Stream: live", "ok"); });
  es.addEventListener("snapshot", scheduleReload);
  es.addEventListener("change", scheduleReload);
  es.addEventListener("error", () => {
    if (es.readyState === EventSource.CLOSED) {
      setBadge("badge-stream", "Stream: disconnected, retrying in " + Math.round(backoff / 1000) + "s", "bad");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 30000);
    } else {
      setBadge("badge-stream", "Stream: reconnecting", "warn");
    }
  });
}

function select(view) {
  for (const b of document.querySelectorAll("[data-view]")) {
    const on = b.dataset.view === view;
    b.setAttribute("aria-selected", on ? "true" : "false");
    $("view-" + b.dataset.view).hidden = !on;
  }
  const hash = "#" + view + (view === "nodes" ? occHash() : view === "pods" && state.podTarget ? "?explain=" + encodeURIComponent(state.podTarget) :
    view === "explain" && state.explainTarget ? explainHash() : "");
  if (location.hash !== hash) history.replaceState(null, "", hash);
}

function explainHash() {
  return "?claim=" + encodeURIComponent(state.explainTarget) + (state.explainDevices ? "&devices=1" : "");
}

// The nodes view keeps its filter, page and selected node in the URL (#nodes?q=…&node=…), so a
// view can be shared or reloaded.
function occHash() {
  const o = state.occ, qs = new URLSearchParams();
  if (o.q) qs.set("q", o.q);
  if (o.state) qs.set("state", o.state);
  if (o.groupBy) qs.set("groupBy", o.groupBy);
  if (o.offset) qs.set("offset", o.offset);
  if (o.node) qs.set("node", o.node);
  const s = qs.toString();
  return s ? "?" + s : "";
}

function occChanged() {
  if (location.hash.startsWith("#nodes")) history.replaceState(null, "", "#nodes" + occHash());
  loadOccupancy().catch((e) => showError("/api/occupancy: " + e.message));
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("[data-view]")) b.addEventListener("click", () => select(b.dataset.view));
  $("claims").addEventListener("click", (ev) => {
    const key = ev.target.closest("[data-explain]")?.dataset.explain;
    if (key) { $("explain-claim").value = key; select("explain"); explain(key, false); }
  });
  $("explain-form").addEventListener("submit", (ev) => { ev.preventDefault(); explain($("explain-claim").value, false); });
  $("explain").addEventListener("click", (ev) => {
    const key = ev.target.closest("[data-explain-devices]")?.dataset.explainDevices;
    if (key) explain(key, true);
  });
  $("pods").addEventListener("click", (ev) => {
    const key = ev.target.closest("[data-explain-pod]")?.dataset.explainPod;
    if (key) explainPod(key);
  });
  $("occupancy").addEventListener("click", (ev) => {
    const node = ev.target.closest("[data-node]")?.dataset.node;
    if (node) { state.occ.node = node; occChanged(); }
  });
  let filterTimer = null;
  $("occ-filter").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => { state.occ.q = $("occ-filter").value.trim(); state.occ.offset = 0; occChanged(); }, 200);
  });
  $("occ-form").addEventListener("submit", (ev) => ev.preventDefault());
  $("occ-state").addEventListener("change", () => { state.occ.state = $("occ-state").value; state.occ.offset = 0; occChanged(); });
  $("occ-group").addEventListener("change", () => { state.occ.groupBy = $("occ-group").value; state.occ.offset = 0; occChanged(); });
  $("occ-prev").addEventListener("click", () => { state.occ.offset = Math.max(0, state.occ.offset - occPageSize); occChanged(); });
  $("occ-next").addEventListener("click", () => { state.occ.offset += occPageSize; occChanged(); });
  const [initial, query] = location.hash.slice(1).split("?");
  if (initial === "pods" && query) state.podTarget = new URLSearchParams(query).get("explain") || ""; // #pods?explain=ns/name
  if (initial === "explain" && query) { // #explain?claim=ns/name[&devices=1]
    const qs = new URLSearchParams(query);
    state.explainTarget = qs.get("claim") || "";
    state.explainDevices = qs.get("devices") === "1";
  }
  if (initial === "nodes" && query) {
    const qs = new URLSearchParams(query);
    state.occ = { q: qs.get("q") || "", state: qs.get("state") || "", groupBy: qs.get("groupBy") || "", offset: Math.max(0, parseInt(qs.get("offset") || "0", 10) || 0), node: qs.get("node") || "" };
    $("occ-filter").value = state.occ.q;
    $("occ-state").value = state.occ.state;
  }
  if (graphColumns && document.querySelector('[data-view="' + initial + '"]')) select(initial);
  checkReady();
  setInterval(checkReady, 10000);
  // serve --reports DIR: link the newest replay report.
  getJSON("/api/version").then((v) => { $("reports-link").hidden = !v.reports; }).catch(() => {});
  loadAll();
  connect();
});
