// The RM's live page: polls the RM's REST API (YARN's /ws/v1/cluster and treadle's
// /ws/v1/treadle/utilization) and draws what it finds. No library: the chart is SVG.
// On a secured RM every request is signed as rm/server/http.py says (HMAC-SHA256 by WebCrypto).
"use strict";

const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(500, 1000 * (parseFloat(params.get("refresh")) || 2));
// The chart spans the samples the RM has, between 1 and 10 minutes (or ?window=SECONDS).
const WINDOW_FIXED_MS = 1000 * (parseFloat(params.get("window")) || 0);
const COLORS = ["#2f6fde", "#e8710a", "#188038", "#a142f4", "#d93025", "#12b5cb"];
const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

let creds = null; // {user, key} when signed in
let lastTs = 0n;
let timer = null;

function $(id) { return document.getElementById(id); }

function loadCreds() {
  try { creds = JSON.parse(sessionStorage.getItem("treadle-creds") || "null"); }
  catch (e) { creds = null; }
}

async function signedHeaders(target) {
  if (!creds) return {};
  if (!window.crypto || !crypto.subtle) {
    throw new Error("this browser signs requests only on https or localhost pages");
  }
  const now = BigInt(Date.now()) * 1000000n;
  lastTs = now > lastTs ? now : lastTs + 1n;
  const ts = lastTs.toString();
  const text = `GET ${target}\n${creds.user}\n${ts}\n${EMPTY_SHA256}`;
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey(
    "raw", enc.encode(creds.key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(text)));
  let bin = "";
  mac.forEach((b) => { bin += String.fromCharCode(b); });
  return { "X-Treadle-User": creds.user, "X-Treadle-Ts": ts, "X-Treadle-Sig": btoa(bin) };
}

class AuthNeeded extends Error {}

async function api(target) {
  const resp = await fetch(target, { headers: await signedHeaders(target) });
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (resp.status === 401) throw new AuthNeeded(message(body) || "sign in");
  if (!resp.ok) throw new Error(`${target}: HTTP ${resp.status} ${message(body) || ""}`);
  return body;
}

function message(body) {
  return body && body.RemoteException ? body.RemoteException.message : "";
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function pct(x) { return `${(Number(x) || 0).toFixed(1)}%`; }
function num(x) { return Math.round(Number(x) || 0).toLocaleString("en"); }
function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// ---------------------------------------------------------------------- sections
function drawSummary(m, info) {
  const c = m.clusterMetrics;
  $("summary").replaceChildren(
    el("span", {}, "policy ", el("b", { id: "sum-policy" }, info.clusterInfo.schedulerType)),
    el("span", {}, "nodes ", el("b", { id: "sum-nodes" }, c.activeNodes),
       c.lostNodes ? ` (${c.lostNodes} lost)` : ""),
    el("span", {}, "apps running ", el("b", { id: "sum-running" }, c.appsRunning + c.appsPending)),
    el("span", {}, "finished ", el("b", { id: "sum-finished" },
                                  c.appsCompleted + c.appsFailed + c.appsKilled)),
    el("span", {}, "containers ", el("b", {}, c.containersAllocated),
       ` (${num(c.containersPending)} pending)`),
    el("span", {}, "vcores ", el("b", {}, `${c.allocatedVirtualCores}/${c.totalVirtualCores}`)),
    el("span", {}, "memory ", el("b", {}, `${num(c.allocatedMB)}/${num(c.totalMB)} MB`)),
  );
}

function drawChart(samples) {
  const chart = $("util-chart");
  const W = 900, H = 240, L = 44, R = 10, T = 10, B = 26;
  const now = samples.length ? samples[samples.length - 1].t : Date.now();
  const span = samples.length ? now - samples[0].t : 0;
  const WINDOW_MS = WINDOW_FIXED_MS || Math.min(600000, Math.max(60000, Math.ceil(span / 60000) * 60000));
  const t0 = now - WINDOW_MS;
  const x = (t) => L + ((t - t0) / WINDOW_MS) * (W - L - R);
  const y = (f) => T + (1 - Math.min(1, Math.max(0, f))) * (H - T - B);
  const parts = [];
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    parts.push(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(f), y2: y(f) }));
    const label = svg("text", { class: "axis", x: L - 6, y: y(f) + 4, "text-anchor": "end" });
    label.textContent = `${f * 100}%`;
    parts.push(label);
  }
  const step = WINDOW_MS / 5;
  for (let k = 0; k <= 5; k++) {
    const t = t0 + k * step;
    const label = svg("text", { class: "axis", x: x(t), y: H - 8, "text-anchor": "middle" });
    label.textContent = k === 5 ? "now" : `-${Math.round((now - t) / 1000)} s`;
    parts.push(label);
  }
  const shown = samples.filter((s) => s.t >= t0);
  const resources = [];
  for (const s of shown) for (const r of Object.keys(s.capacity)) if (!resources.includes(r)) resources.push(r);
  resources.sort();
  const legend = [];
  resources.forEach((r, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = shown.filter((s) => s.capacity[r]).map(
      (s) => `${x(s.t).toFixed(1)},${y((s.used[r] || 0) / s.capacity[r]).toFixed(1)}`);
    parts.push(svg("polyline", { class: "series", stroke: color, points: pts.join(" "),
                                 "data-resource": r, "data-points": pts.length }));
    const last = shown.length ? shown[shown.length - 1] : null;
    const now_ = last && last.capacity[r] ? (last.used[r] || 0) / last.capacity[r] : 0;
    legend.push(el("span", {}, el("i", { style: `background:${color}` }), `${r} ${pct(100 * now_)}`));
  });
  chart.replaceChildren(...parts);
  chart.dataset.zeroY = String(y(0));
  $("util-legend").replaceChildren(...legend);
  $("util-window").textContent = `(used / capacity, last ${Math.round(WINDOW_MS / 60000)} min)`;
}

function drawQueues(sched) {
  const info = sched.scheduler.schedulerInfo;
  $("policy").textContent = `policy ${info.policy}` + (info.price != null ? `, price ${info.price}` : "");
  const rows = [];
  const walk = (q, depth) => {
    const share = q.policyShareOfCluster;
    const budget = q.budget != null ? `${Number(q.budget).toFixed(1)} @ ${q.spendingRate}` : "";
    rows.push(el("tr", { "data-queue": q.queueName },
      el("td", { style: `padding-left:${8 + 16 * depth}px` }, q.queueName),
      el("td", { class: "num" }, pct(q.absoluteCapacity)),
      el("td", { class: "num" }, pct(q.absoluteUsedCapacity)),
      el("td", { class: "num" }, share == null ? "–" : pct(share)),
      el("td", { class: "num" }, q.numApplications),
      el("td", { class: "num" }, q.numContainers),
      el("td", { class: "num" }, num(q.pendingContainers)),
      el("td", {}, budget)));
    for (const c of (q.queues && q.queues.queue) || []) walk(c, depth + 1);
  };
  walk({ ...info, queueName: info.queueName, absoluteCapacity: 100,
         absoluteUsedCapacity: info.usedCapacity, policyShareOfCluster: null,
         numApplications: sumOf(info, "numApplications"), numContainers: sumOf(info, "numContainers"),
         pendingContainers: sumOf(info, "pendingContainers") }, 0);
  fill($("queues").tBodies[0], rows);
}

function sumOf(info, key) {
  return ((info.queues && info.queues.queue) || []).reduce((a, q) => a + (q[key] || 0), 0);
}

function drawApps(apps, nowS) {
  const list = (apps.apps && apps.apps.app) || [];
  // Running first (newest first), then the ended ones, most recently ended first.
  const running = list.filter((a) => a.finishedTime === 0).reverse();
  const ended = list.filter((a) => a.finishedTime !== 0).sort((a, b) => b.finishedTime - a.finishedTime);
  const rows = [...running, ...ended].slice(0, 200).map((a) => el("tr", { "data-app-id": a.id },
    el("td", {}, a.id), el("td", {}, a.name), el("td", {}, a.user), el("td", {}, a.queue),
    el("td", {}, el("span", { class: `state ${a.state}` }, a.state)),
    el("td", { class: "progress" }, el("span", { class: "bar" }, el("i", { style: `width:${a.progress}%` })),
       `${Number(a.progress).toFixed(0)}%`),
    el("td", { class: "num" }, a.runningContainers),
    el("td", { class: "num" }, a.allocatedVCores),
    el("td", { class: "num" }, num(a.allocatedMB)),
    el("td", { class: "num" }, duration(1000 * ((a.finishS != null ? a.finishS : nowS) - a.submitS)))));
  fill($("apps").tBodies[0], rows);
  $("apps-count").textContent = `(${running.length} running, ${ended.length} ended)`;
}

function drawNodes(nodes) {
  const list = (nodes.nodes && nodes.nodes.node) || [];
  const rows = list.map((n) => {
    const tot = n.totalResource;
    return el("tr", { "data-node-id": n.id },
      el("td", {}, n.id), el("td", {}, n.rack),
      el("td", {}, el("span", { class: `state ${n.state}` }, n.state)),
      el("td", { class: "num" }, n.numContainers),
      el("td", { class: "num" }, `${n.usedVirtualCores}/${tot.vCores}`),
      el("td", { class: "num" }, `${num(n.usedMemoryMB)}/${num(tot.memory)} MB`));
  });
  fill($("nodes").tBodies[0], rows);
  $("nodes-count").textContent = `(${list.length})`;
}

// ---------------------------------------------------------------------- the loop
async function refresh() {
  try {
    const [info, metrics, apps, nodes, sched, util] = await Promise.all([
      api("/ws/v1/cluster/info"), api("/ws/v1/cluster/metrics"), api("/ws/v1/cluster/apps"),
      api("/ws/v1/cluster/nodes"), api("/ws/v1/cluster/scheduler"),
      api("/ws/v1/treadle/utilization"),
    ]);
    drawSummary(metrics, info);
    drawChart(util.utilization.sample);
    $("summary").append(
      el("span", {}, "emulated t ", el("b", {}, `${metrics.clusterMetrics.emulatedTimeS.toFixed(0)} s`)));
    drawQueues(sched);
    drawApps(apps, metrics.clusterMetrics.emulatedTimeS);
    drawNodes(nodes);
    $("status").className = "status";
    $("status").textContent = `updated ${new Date().toLocaleTimeString()} · every ${REFRESH_MS / 1000} s`;
    document.body.dataset.updated = String(Date.now());
  } catch (e) {
    if (e instanceof AuthNeeded) {
      showLogin(creds ? e.message : "");
      return;
    }
    $("status").className = "status error";
    $("status").textContent = `cannot read the RM: ${e.message}`;
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

function showLogin(error) {
  clearTimeout(timer);
  $("login").hidden = false;
  $("login-error").textContent = error || "";
  $("status").textContent = "this RM is secured: sign in";
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  creds = { user: $("login-user").value.trim(), key: $("login-key").value.trim() };
  sessionStorage.setItem("treadle-creds", JSON.stringify(creds));
  $("login").hidden = true;
  refresh();
});

loadCreds();
refresh();
