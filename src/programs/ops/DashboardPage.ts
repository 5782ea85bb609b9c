/**
 * The dashboard page (SPEC §10): one self-contained HTML document (inline CSS and script, no CDN, charts
 * drawn as inline SVG) that polls the operations endpoint's JSON API — charts of delivered, dead-lettered
 * and sink failures per second, pending depth and oldest pending age over the last 15 minutes, totals since
 * start, a per-route table when records carry routes; partitions with depths, oldest pending age, fence,
 * lease and stranded heads; dead-letter entries with the sink's own error text, filters, paging, and
 * redrive (selected, or every entry of a filter) / purge of a filter behind a confirmation that shows how
 * many entries it touches, when mutations are allowed. Stored text is only ever set as text, never markup.
 *
 * @since 0.1.0
 */

/**
 * What the page is rendered with.
 *
 * @since 0.1.0
 */
export interface PageOptions {
  /** The per-process token every POST must echo in `x-csrf-token`. */
  readonly csrfToken: string
  /** Whether redrive and purge are offered (the server refuses them otherwise). */
  readonly allowMutations: boolean
  /** Poll interval of the page in milliseconds. */
  readonly refreshMillis: number
}

const escapeHtml = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const style = `
:root { color-scheme: light dark; --fg: #1d2430; --muted: #667085; --bg: #f7f8fa; --card: #fff; --line: #e4e7ec;
  --accent: #2f6fdf; --warn: #b54708; --bad: #b42318; --good: #067647; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e8eb; --muted: #98a2b3; --bg: #12151a; --card: #1b1f26;
  --line: #2c323c; --accent: #6c9cf0; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: baseline; gap: 16px; padding: 14px 24px; border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 18px; margin: 0; }
header .meta { color: var(--muted); }
main { padding: 16px 24px; display: grid; gap: 16px; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; }
section h2 { font-size: 15px; margin: 0 0 8px; }
.summary { display: flex; gap: 24px; flex-wrap: wrap; }
.stat { min-width: 120px; }
.stat b { display: block; font-size: 22px; font-variant-numeric: tabular-nums; }
.stat span { color: var(--muted); }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; }
.tag { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 12px; }
.tag.bad { background: color-mix(in srgb, var(--bad) 15%, transparent); color: var(--bad); }
.tag.warn { background: color-mix(in srgb, var(--warn) 15%, transparent); color: var(--warn); }
.tag.good { background: color-mix(in srgb, var(--good) 15%, transparent); color: var(--good); }
form.filters { display: flex; gap: 8px; flex-wrap: wrap; align-items: end; margin-bottom: 8px; }
form.filters label { display: grid; gap: 2px; color: var(--muted); font-size: 12px; }
input, select, button { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); }
button { cursor: pointer; }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
button.danger { color: var(--bad); border-color: var(--bad); }
.muted { color: var(--muted); }
.error { color: var(--bad); }
.pager { display: flex; gap: 8px; align-items: center; margin-top: 8px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; }
.chart h3 { font-size: 13px; margin: 0 0 4px; font-weight: 600; display: flex; justify-content: space-between; }
.chart h3 b { font-variant-numeric: tabular-nums; }
.chart svg { width: 100%; height: 110px; display: block; }
.chart svg .area { fill: color-mix(in srgb, var(--line-color) 18%, transparent); stroke: none; }
.chart svg .line { fill: none; stroke: var(--line-color); stroke-width: 1.5; }
.chart svg .grid { stroke: var(--line); stroke-width: 1; }
.chart svg text { fill: var(--muted); font-size: 10px; }
.chart.delivered { --line-color: var(--good); }
.chart.dead-lettered { --line-color: var(--bad); }
.chart.failures { --line-color: var(--warn); }
.chart.pending, .chart.age { --line-color: var(--accent); }
svg.spark { width: 160px; height: 24px; display: block; }
svg.spark .line { fill: none; stroke: var(--warn); stroke-width: 1.5; }
td.error-text { white-space: normal; min-width: 260px; max-width: 420px; word-break: break-word; font-family: ui-monospace, monospace; font-size: 12px; }
`

const script = `
const token = document.querySelector('meta[name="csrf-token"]').content;
const allowMutations = document.body.dataset.mutations === "true";
const refreshMillis = Number(document.body.dataset.refresh);
const $ = (id) => document.getElementById(id);
const text = (value) => value === null || value === undefined ? "—" : String(value);
const el = (tag, attrs, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(text(child)));
  return node;
};
const age = (ms) => {
  if (ms === null || ms === undefined) return "—";
  const s = Math.floor(ms / 1000);
  return s < 60 ? s + " s" : s < 3600 ? Math.floor(s / 60) + " min" : Math.floor(s / 3600) + " h";
};

async function refreshPartitions() {
  try {
    const response = await fetch("api/partitions", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const data = await response.json();
    $("backend").textContent = data.backend;
    $("updated").textContent = new Date(data.at).toLocaleTimeString();
    let pending = 0, claimed = 0, stranded = 0, unleased = 0, unleasedAge = null;
    const rows = data.partitions.map((p) => {
      pending += p.pending || 0; claimed += p.claimed || 0; if (p.stranded) stranded++;
      if (p.pending > 0 && (p.lease === null || !p.lease.live)) {
        unleased++;
        if (p.oldestPendingAgeMs !== null) unleasedAge = Math.max(unleasedAge ?? 0, p.oldestPendingAgeMs);
      }
      const lease = p.lease === null ? "—" : p.lease.owner + " v" + p.lease.version + (p.lease.live ? "" : " (expired)");
      return el("tr", { "data-partition": p.partitionKey },
        el("td", {}, p.partitionKey),
        el("td", { class: "num", "data-field": "pending" }, text(p.pending)),
        el("td", { class: "num", "data-field": "claimed" }, text(p.claimed)),
        el("td", { class: "num" }, age(p.oldestPendingAgeMs)),
        el("td", { class: "num" }, text(p.fence)),
        el("td", {}, lease),
        el("td", {}, p.stranded ? el("span", { class: "tag bad" }, p.stranded) : el("span", { class: "tag good" }, "ok")));
    });
    $("partitions").replaceChildren(...rows);
    $("total-pending").textContent = pending;
    $("total-claimed").textContent = claimed;
    $("total-stranded").textContent = stranded;
    $("total-unleased").textContent = unleased === 0 ? "0" : unleased + " (oldest " + age(unleasedAge) + ")";
    $("total-dlq").textContent = data.deadLetters.poison + data.deadLetters.permanent + data.deadLetters.expired;
    $("notes").textContent = data.notes.join(" ");
    $("partitions-error").textContent = "";
  } catch (error) {
    $("partitions-error").textContent = "cannot load partitions: " + error.message;
  }
}

const SVG = "http://www.w3.org/2000/svg";
const svgEl = (tag, attrs) => {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
};
const round = (v) => v === null || v === undefined ? "—" : v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10);
/** Per-second rates between neighbouring points of a cumulative count. */
const rates = (points, pick) => {
  const out = [];
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1], b = points[i];
    const dt = (b.at - a.at) / 1000;
    const av = pick(a), bv = pick(b);
    if (dt > 0 && av !== null && bv !== null) out.push({ at: b.at, v: Math.max(0, bv - av) / dt });
  }
  return out;
};
const levels = (points, pick) => points.filter((p) => pick(p) !== null).map((p) => ({ at: p.at, v: pick(p) }));
/** Draws a series over the window into an inline SVG (no library). */
function draw(svg, series, windowMillis, now, unit) {
  const w = 300, h = 110, left = 34, bottom = 14, top = 6;
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.setAttribute("preserveAspectRatio", "none");
  const peak = series.reduce((m, p) => Math.max(m, p.v), 0);
  const max = peak > 0 ? peak * 1.1 : 1;
  const x = (at) => left + (w - left) * Math.min(1, Math.max(0, 1 - (now - at) / windowMillis));
  const ago = windowMillis >= 120000 ? Math.round(windowMillis / 60000) + " min ago" : Math.round(windowMillis / 1000) + " s ago";
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const nodes = [
    svgEl("line", { class: "grid", x1: left, x2: w, y1: y(0), y2: y(0) }),
    svgEl("line", { class: "grid", x1: left, x2: w, y1: y(max), y2: y(max) })
  ];
  const label = (text, attrs) => { const t = svgEl("text", attrs); t.textContent = text; return t; };
  nodes.push(label(round(max) + unit, { x: 2, y: top + 8 }));
  nodes.push(label("0", { x: 2, y: y(0) }));
  nodes.push(label(ago, { x: left, y: h - 2 }));
  nodes.push(label("now", { x: w - 22, y: h - 2 }));
  if (series.length > 0) {
    const pts = series.map((p) => x(p.at).toFixed(1) + "," + y(p.v).toFixed(1));
    nodes.push(svgEl("path", { class: "area", d: "M" + x(series[0].at).toFixed(1) + "," + y(0) + " L" + pts.join(" L") + " L" + x(series[series.length - 1].at).toFixed(1) + "," + y(0) + " Z" }));
    nodes.push(svgEl("path", { class: "line", d: "M" + pts.join(" L") }));
  }
  svg.replaceChildren(...nodes);
  const last = series.length > 0 ? series[series.length - 1].v : null;
  svg.dataset.points = String(series.length);
  svg.dataset.last = last === null ? "" : String(last);
  svg.dataset.peak = String(peak);
  return last;
}
function spark(series, windowMillis, now) {
  const svg = svgEl("svg", { class: "spark", viewBox: "0 0 160 24", preserveAspectRatio: "none" });
  const peak = series.reduce((m, p) => Math.max(m, p.v), 0);
  const max = peak > 0 ? peak : 1;
  const pts = series.map((p) => (160 * Math.min(1, Math.max(0, 1 - (now - p.at) / windowMillis))).toFixed(1) + "," + (22 - 20 * p.v / max).toFixed(1));
  if (pts.length > 0) svg.append(svgEl("path", { class: "line", d: "M" + pts.join(" L") }));
  return svg;
}
async function refreshHistory() {
  try {
    const response = await fetch("api/history", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const data = await response.json();
    const points = data.points;
    // the server's clock: the newest sample (no sample, no chart)
    const now = points.length > 0 ? points[points.length - 1].at : 0;
    // the charts span the kept window, or less while the process is younger than it
    const windowMillis = points.length > 0 ? Math.min(data.windowMillis, Math.max(10000, now - points[0].at)) : data.windowMillis;
    $("history-span").textContent = windowMillis < data.windowMillis ? "(since the page's server started)" : "";
    const charts = [
      ["delivered", rates(points, (p) => p.delivered), "/s"],
      ["dead-lettered", rates(points, (p) => p.deadLettered), "/s"],
      ["failures", rates(points, (p) => p.sinkFailures), "/s"],
      ["pending", levels(points, (p) => p.pending), ""],
      ["age", levels(points, (p) => p.oldestPendingAgeSeconds), " s"]
    ];
    for (const [name, series, unit] of charts) {
      const last = draw($("chart-" + name), series, windowMillis, now, unit);
      $("now-" + name).textContent = last === null ? "—" : round(last) + unit;
    }
    const latest = points[points.length - 1];
    if (latest !== undefined) {
      $("total-delivered").textContent = latest.delivered;
      $("total-dead-lettered").textContent = latest.deadLettered;
      $("total-failures").textContent = latest.sinkFailures;
    }
    const routes = latest === undefined ? [] : Object.keys(latest.routes).sort();
    $("routes-section").hidden = routes.length === 0;
    const rows = routes.map((route) => {
      const pick = (kind) => (p) => p.routes[route] === undefined ? null : p.routes[route][kind];
      const failures = rates(points.filter((p) => p.routes[route] !== undefined), pick("sinkFailures"));
      const delivered = rates(points.filter((p) => p.routes[route] !== undefined), pick("delivered"));
      const peak = failures.reduce((m, p) => Math.max(m, p.v), 0);
      const totals = latest.routes[route];
      return el("tr", { "data-route": route },
        el("td", {}, route),
        el("td", { class: "num", "data-field": "delivered" }, totals.delivered),
        el("td", { class: "num", "data-field": "dead-lettered" }, totals.deadLettered),
        el("td", { class: "num", "data-field": "failures" }, totals.sinkFailures),
        el("td", { class: "num", "data-field": "delivered-rate" }, round(delivered.length > 0 ? delivered[delivered.length - 1].v : 0)),
        el("td", { class: "num", "data-field": "failure-peak" }, round(peak)),
        el("td", {}, spark(failures, windowMillis, now)));
    });
    $("routes").replaceChildren(...rows);
    $("history-error").textContent = "";
  } catch (error) {
    $("history-error").textContent = "cannot load history: " + error.message;
  }
}

let cursors = [null];
const selected = new Set();
const pick = (id) => {
  const box = el("input", { type: "checkbox", class: "pick", value: id, onchange: (event) => {
    if (event.target.checked) selected.add(id); else selected.delete(id);
  } });
  box.checked = selected.has(id);
  return box;
};
function filterParams() {
  const form = $("dlq-filters");
  const params = new URLSearchParams();
  for (const name of ["route", "category", "since", "before"]) {
    const value = form.elements[name].value.trim();
    if (value !== "") params.set(name, name === "since" || name === "before" ? new Date(value).toISOString() : value);
  }
  return params;
}
async function refreshDeadLetters() {
  try {
    const params = filterParams();
    params.set("limit", "20");
    const cursor = cursors[cursors.length - 1];
    if (cursor !== null) params.set("cursor", cursor);
    const response = await fetch("api/dead-letters?" + params, { cache: "no-store" });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
    const shown = new Set(data.entries.map((e) => e.id));
    for (const id of Array.from(selected)) if (!shown.has(id)) selected.delete(id);
    const rows = data.entries.map((e) => el("tr", { "data-entry": e.id },
      allowMutations ? el("td", {}, pick(e.id)) : el("td", {}, ""),
      el("td", {}, new Date(e.failedAt).toLocaleString()),
      el("td", {}, e.partitionKey),
      el("td", {}, e.recordId),
      el("td", {}, el("span", { class: "tag warn" }, e.category)),
      el("td", {}, e.routeId || "—"),
      el("td", { class: "num" }, e.attempts),
      el("td", {}, e.reason),
      el("td", { class: "error-text", "data-field": "last-error" }, (e.errorCode ? e.errorCode + ": " : "") + e.lastError),
      el("td", {}, e.headerNames.join(", ")),
      e.payload === undefined ? el("td", { class: "muted" }, "hidden") : el("td", {}, e.payload)));
    $("dead-letters").replaceChildren(...rows);
    $("dlq-empty").hidden = rows.length > 0;
    $("dlq-next").disabled = data.nextCursor === null;
    $("dlq-prev").disabled = cursors.length === 1;
    $("dlq-next").dataset.cursor = data.nextCursor || "";
    $("dlq-page").textContent = "page " + cursors.length;
    $("dlq-error").textContent = "";
  } catch (error) {
    $("dlq-error").textContent = "cannot load dead letters: " + error.message;
  }
}
async function post(path, body) {
  const response = await fetch(path, { method: "POST", headers: { "content-type": "application/json", "x-csrf-token": token }, body: JSON.stringify(body) });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
  return data;
}
async function redrive() {
  const ids = Array.from(selected);
  if (ids.length === 0) { $("dlq-status").textContent = "select entries to redrive"; return; }
  if (!window.confirm("Redrive " + ids.length + " dead-letter entr" + (ids.length === 1 ? "y" : "ies") + "? They are enqueued again as new records.")) return;
  try {
    const data = await post("api/dead-letters/redrive", { ids });
    $("dlq-status").textContent = "redriven: " + data.recordIds.length;
    selected.clear();
  } catch (error) { $("dlq-status").textContent = "redrive failed: " + error.message; }
  await refreshDeadLetters();
}
const describeFilter = (params) => {
  const parts = Object.entries(params).map(([k, v]) => k + "=" + v);
  return parts.length === 0 ? "with no filter (every entry)" : "matching " + parts.join(", ");
};
async function countMatching(params) {
  const response = await fetch("api/dead-letters/count?" + new URLSearchParams(params), { cache: "no-store" });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
  return data;
}
async function purge() {
  const params = Object.fromEntries(filterParams());
  try {
    const found = await countMatching(params);
    if (found.count === 0) { $("dlq-status").textContent = "no entries match"; return; }
    const many = found.count + (found.capped ? " (the oldest; more match)" : "");
    if (!window.confirm("Delete " + many + " dead-letter entr" + (found.count === 1 ? "y" : "ies") + " " + describeFilter(params) + "? This cannot be undone.")) return;
    const body = Object.keys(params).length === 0 ? { all: true } : params;
    const data = await post("api/dead-letters/purge", { ...body, limit: found.count });
    $("dlq-status").textContent = "purged: " + data.deleted;
  } catch (error) { $("dlq-status").textContent = "purge failed: " + error.message; }
  cursors = [null];
  await refreshDeadLetters();
}
async function redriveMatching() {
  const params = Object.fromEntries(filterParams());
  try {
    const found = await countMatching(params);
    if (found.count === 0) { $("dlq-status").textContent = "no entries match"; return; }
    const many = found.count + (found.capped ? " (the oldest; more match)" : "");
    if (!window.confirm("Redrive " + many + " dead-letter entr" + (found.count === 1 ? "y" : "ies") + " " + describeFilter(params) + "? They are enqueued again as new records.")) return;
    const data = await post("api/dead-letters/redrive-matching", { ...params, expected: found.count });
    $("dlq-status").textContent = "redriven: " + data.redriven;
    selected.clear();
  } catch (error) { $("dlq-status").textContent = "redrive failed: " + error.message; }
  cursors = [null];
  await refreshDeadLetters();
}

$("dlq-filters").addEventListener("submit", (event) => { event.preventDefault(); cursors = [null]; refreshDeadLetters(); });
$("dlq-next").addEventListener("click", () => { cursors.push($("dlq-next").dataset.cursor); refreshDeadLetters(); });
$("dlq-prev").addEventListener("click", () => { if (cursors.length > 1) cursors.pop(); refreshDeadLetters(); });
if (allowMutations) {
  $("dlq-redrive").addEventListener("click", redrive);
  $("dlq-purge").addEventListener("click", purge);
  $("dlq-redrive-matching").addEventListener("click", redriveMatching);
}
refreshPartitions(); refreshDeadLetters(); refreshHistory();
setInterval(refreshPartitions, refreshMillis);
setInterval(refreshHistory, refreshMillis);
setInterval(refreshDeadLetters, refreshMillis * 2);
`

/**
 * Renders the page.
 *
 * @since 0.1.0
 */
export const render = (options: PageOptions): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="${escapeHtml(options.csrfToken)}">
<title>effect-outbox</title>
<style>${style}</style>
</head>
<body data-mutations="${options.allowMutations ? "true" : "false"}" data-refresh="${Math.max(200, Math.floor(options.refreshMillis))}">
<header><h1>effect-outbox</h1><span class="meta">backend <b id="backend">…</b> · updated <span id="updated">…</span></span></header>
<main>
<section>
  <div class="summary">
    <div class="stat"><b id="total-pending">…</b><span>pending</span></div>
    <div class="stat"><b id="total-claimed">…</b><span>claimed</span></div>
    <div class="stat"><b id="total-stranded">…</b><span>stranded heads</span></div>
    <div class="stat"><b id="total-unleased">…</b><span>pending, no lease</span></div>
    <div class="stat"><b id="total-dlq">…</b><span>dead letters</span></div>
    <div class="stat"><b id="total-delivered">…</b><span>delivered since start</span></div>
    <div class="stat"><b id="total-dead-lettered">…</b><span>dead-lettered since start</span></div>
    <div class="stat"><b id="total-failures">…</b><span>sink failures since start</span></div>
  </div>
</section>
<section>
  <h2>Last 15 minutes <span class="muted" id="history-span"></span></h2>
  <p class="error" id="history-error"></p>
  <div class="charts">
    <div class="chart delivered"><h3>delivered/s <b id="now-delivered">…</b></h3><svg id="chart-delivered" role="img" aria-label="delivered per second"></svg></div>
    <div class="chart dead-lettered"><h3>dead-lettered/s <b id="now-dead-lettered">…</b></h3><svg id="chart-dead-lettered" role="img" aria-label="dead-lettered per second"></svg></div>
    <div class="chart failures"><h3>sink failures/s <b id="now-failures">…</b></h3><svg id="chart-failures" role="img" aria-label="sink failures per second"></svg></div>
    <div class="chart pending"><h3>pending <b id="now-pending">…</b></h3><svg id="chart-pending" role="img" aria-label="pending records"></svg></div>
    <div class="chart age"><h3>oldest pending age <b id="now-age">…</b></h3><svg id="chart-age" role="img" aria-label="oldest pending age in seconds"></svg></div>
  </div>
</section>
<section id="routes-section" hidden>
  <h2>Routes</h2>
  <table>
    <thead><tr><th>route</th><th class="num">delivered</th><th class="num">dead-lettered</th><th class="num">sink failures</th><th class="num">delivered/s</th><th class="num">peak failures/s</th><th>failures/s, 15 min</th></tr></thead>
    <tbody id="routes"></tbody>
  </table>
</section>
<section>
  <h2>Partitions</h2>
  <p class="error" id="partitions-error"></p>
  <table>
    <thead><tr><th>partition</th><th class="num">pending</th><th class="num">claimed</th><th class="num">oldest pending</th><th class="num">fence</th><th>lease</th><th>head</th></tr></thead>
    <tbody id="partitions"></tbody>
  </table>
  <p class="muted" id="notes"></p>
</section>
<section>
  <h2>Dead letters</h2>
  <form class="filters" id="dlq-filters">
    <label>route<input name="route" placeholder="any"></label>
    <label>category<select name="category"><option value="">any</option><option>poison</option><option>permanent</option><option>expired</option></select></label>
    <label>since<input name="since" type="datetime-local" step="1"></label>
    <label>before<input name="before" type="datetime-local" step="1"></label>
    <button type="submit">Filter</button>
    ${
      options.allowMutations
        ? `<button type="button" class="primary" id="dlq-redrive">Redrive selected</button>
    <button type="button" id="dlq-redrive-matching">Redrive matching</button>
    <button type="button" class="danger" id="dlq-purge">Purge matching</button>`
        : `<span class="muted">read-only (start the relay with --http-allow-mutations to redrive or purge)</span>`
    }
  </form>
  <p class="error" id="dlq-error"></p>
  <p class="muted" id="dlq-status"></p>
  <table>
    <thead><tr><th></th><th>failed at</th><th>partition</th><th>record</th><th>category</th><th>route</th><th class="num">attempts</th><th>reason</th><th>sink's error</th><th>headers</th><th>payload</th></tr></thead>
    <tbody id="dead-letters"></tbody>
  </table>
  <p class="muted" id="dlq-empty" hidden>no dead-letter entries match</p>
  <div class="pager"><button type="button" id="dlq-prev" disabled>Previous</button><span id="dlq-page">page 1</span><button type="button" id="dlq-next" disabled>Next</button></div>
</section>
</main>
<script>${script}</script>
</body>
</html>
`
