// Switchyard console: asks through the HTTP API, follows the query's event stream
// (GET /v1/queries/{id}/events as server-sent events, read with fetch so the identity headers
// travel with it) and draws the query as a timeline. No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null; // { id, events: [], abort }

function identity() {
  const h = { "x-switchyard-user": $("user").value.trim() || "console-user" };
  const roles = $("roles").value.trim();
  if (roles) h["x-switchyard-roles"] = roles;
  return h;
}

async function api(method, path, body) {
  const headers = identity();
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  return { status: r.status, json };
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

function errorText(res) {
  const e = res.json && res.json.error;
  return e ? `${res.status} ${e.code || ""}: ${e.message || ""}` : `HTTP ${res.status}`;
}

// ---- asking ----------------------------------------------------------------------------------

$("ask").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const body = { query: question };
  const session = $("session").value.trim();
  if (session) body.session_id = session;
  $("ask-button").disabled = true;
  $("ask-status").textContent = "asking…";
  $("ask-status").className = "";
  try {
    const res = await api("POST", "/v1/queries", body);
    if (res.status !== 202 && res.status !== 200) {
      $("ask-status").textContent = errorText(res);
      $("ask-status").className = "error";
      return;
    }
    $("ask-status").textContent = `accepted as ${res.json.intent} (${pct(res.json.confidence)})`;
    follow(res.json.query_id);
  } catch (e) {
    $("ask-status").textContent = "request failed: " + e.message;
    $("ask-status").className = "error";
  } finally {
    $("ask-button").disabled = false;
  }
});

// ---- following a query ---------------------------------------------------------------------

async function follow(id) {
  if (current && current.abort) current.abort.abort();
  const abort = new AbortController();
  current = { id, events: [], abort };
  $("timeline-panel").hidden = false;
  $("timeline-id").textContent = id;
  $("answer-panel").hidden = true;
  draw();
  try {
    const headers = identity();
    headers["accept"] = "text/event-stream";
    const r = await fetch(`/v1/queries/${encodeURIComponent(id)}/events`, { headers, signal: abort.signal });
    if (r.status !== 200) {
      $("timeline").textContent = `events: HTTP ${r.status}`;
      return;
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
        if (!data || current.id !== id) continue;
        try { current.events.push(JSON.parse(data)); } catch (_) { continue; }
      }
      if (current.id === id) draw();
    }
  } catch (e) {
    if (e.name !== "AbortError") $("timeline").append(el("p", { class: "error" }, "stream ended: " + e.message));
  }
  if (current.id === id) {
    draw();
    await showAnswer(id);
    loadRecent();
  }
}

async function showAnswer(id) {
  const res = await api("GET", `/v1/queries/${encodeURIComponent(id)}`);
  if (res.status !== 200 || !res.json) return;
  const o = res.json;
  $("answer-panel").hidden = false;
  $("answer-status").textContent = o.status;
  $("answer-status").className = "pill " + o.status;
  $("answer-band").textContent = o.final_reason ? `${band(o.final_reason)} · ${pct(o.response_confidence)}` : pct(o.response_confidence);
  $("answer-text").textContent = o.response_text || "(no text)";
  const caveats = $("answer-caveats");
  caveats.replaceChildren(...(o.caveats || []).map((c) => el("li", {}, c)));
  $("answer-meta").textContent =
    `agents: ${(o.agents_dispatched || []).join(", ")} · citations: ${(o.citations || []).length} · ${o.total_latency_ms} ms`;
}

// ---- the timeline --------------------------------------------------------------------------

function pct(x) { return typeof x === "number" ? Math.round(x * 100) + "%" : "?"; }
function band(b) { return String(b).replace(/^confidence_/, "").replace(/_/g, " "); }
function ms(t) { return new Date(t).getTime(); }

function model(events) {
  const m = { route: null, plan: null, lanes: new Map(), marks: [], steps: [], critiques: [], synthesis: null, final: null, deadline: null, t0: null, t1: null };
  for (const e of events) {
    const t = ms(e.at), d = e.detail || {};
    if (m.t0 === null || t < m.t0) m.t0 = t;
    if (m.t1 === null || t > m.t1) m.t1 = t;
    switch (e.kind) {
      case "route": m.route = d; break;
      case "plan": m.plan = d; break;
      case "dispatch": {
        const lane = m.lanes.get(d.dispatch_id) || { retries: [], fallbacks: [] };
        Object.assign(lane, { id: d.dispatch_id, agent: d.agent, tier: d.tier, role: d.role, timeout_ms: d.timeout_ms, start: t });
        m.lanes.set(d.dispatch_id, lane);
        break;
      }
      case "retry": laneOf(m, d.dispatch_id).retries.push({ t, attempt: d.attempt, error: d.error_type }); break;
      case "fallback": laneOf(m, d.dispatch_id).fallbacks.push({ t, to: d.fallback_agent, error: d.error_type }); break;
      case "handoff": {
        const lane = laneOf(m, d.dispatch_id);
        Object.assign(lane, { end: t, status: d.status, attempts: d.attempts, latency_ms: d.latency_ms, confidence: d.confidence });
        if (!lane.agent) lane.agent = d.agent;
        if (lane.tier === undefined) lane.tier = d.tier;
        break;
      }
      case "critique": m.critiques.push({ t, round: d.round, verdict: d.verdict }); break;
      case "step": case "gate": m.steps.push({ t, kind: e.kind, what: d.step || d.gate || d.name || e.key, detail: d }); break;
      case "deadline": m.deadline = { t, timed_out: d.timed_out || [] }; break;
      case "synthesis": m.synthesis = { t, ...d }; break;
      case "final": m.final = { t, ...d }; break;
    }
  }
  return m;
}

function laneOf(m, id) {
  if (!m.lanes.has(id)) m.lanes.set(id, { id, retries: [], fallbacks: [] });
  return m.lanes.get(id);
}

function statusClass(s) {
  if (!s) return "running";
  if (s === "success") return "ok";
  if (s === "timeout") return "timeout";
  if (s === "partial") return "partial";
  return "failed";
}

function draw() {
  const m = model(current ? current.events : []);
  drawRoute(m);
  const box = $("timeline");
  box.replaceChildren();
  if (m.t0 === null) { box.append(el("p", { class: "muted" }, "waiting for events…")); return; }
  const end = m.final ? m.t1 : Math.max(m.t1, Date.now());
  const span = Math.max(end - m.t0, 1);
  const x = (t) => (100 * (t - m.t0) / span).toFixed(2) + "%";
  box.append(el("div", { class: "axis" }, el("span", {}, "0 ms"), el("span", {}, `${Math.round(span / 2)} ms`), el("span", {}, `${Math.round(span)} ms`)));

  for (const lane of m.lanes.values()) {
    const cls = statusClass(lane.status);
    const stop = lane.end !== undefined ? lane.end : end;
    const start = lane.start !== undefined ? lane.start : stop;
    const track = el("div", { class: "track" },
      el("div", { class: "bar " + cls, style: `left:${x(start)};width:calc(${x(stop)} - ${x(start)})`,
        title: `${lane.agent}: ${lane.status || "running"}${lane.latency_ms !== undefined ? ", " + lane.latency_ms + " ms" : ""}` }));
    for (const r of lane.retries) track.append(el("span", { class: "mark retry", style: `left:${x(r.t)}`, title: `attempt ${r.attempt} failed: ${r.error}` }, "↻"));
    for (const f of lane.fallbacks) track.append(el("span", { class: "mark fallback", style: `left:${x(f.t)}`, title: `fallback to ${f.to} (${f.error})` }, "⇄"));
    const notes = [];
    if (lane.role) notes.push(lane.role);
    if (lane.attempts > 1) notes.push(`${lane.attempts} attempts`);
    if (lane.retries.length) notes.push(`${lane.retries.length} retr${lane.retries.length > 1 ? "ies" : "y"}`);
    if (lane.fallbacks.length) notes.push("fell back");
    if (lane.status === "timeout") notes.push("timed out");
    else if (lane.status) notes.push(lane.status);
    if (lane.timeout_ms) notes.push(`limit ${lane.timeout_ms} ms`);
    box.append(el("div", { class: "lane dispatch", "data-kind": "dispatch", "data-agent": lane.agent || "", "data-status": lane.status || "running" },
      el("div", { class: "label", title: notes.join(" · ") },
        el("span", { class: "tier" }, "T" + (lane.tier !== undefined ? lane.tier : "?")), lane.agent || lane.id, " ", el("span", { class: "muted" }, notes.join(" · "))),
      track));
  }
  if (m.steps.length) {
    const track = el("div", { class: "track" });
    for (const s of m.steps) track.append(el("span", { class: "dot", style: `left:${x(s.t)}`, title: `${s.kind}: ${s.what}` }));
    box.append(el("div", { class: "lane", "data-kind": "steps" }, el("div", { class: "label" }, `steps (${m.steps.length}): `, el("span", { class: "muted" }, [...new Set(m.steps.map((s) => s.what))].join(", "))), track));
  }
  if (m.critiques.length) {
    const track = el("div", { class: "track" });
    for (const c of m.critiques) track.append(el("span", { class: "mark critique", style: `left:${x(c.t)}`, title: `round ${c.round}: ${c.verdict}` }, "✎"));
    box.append(el("div", { class: "lane", "data-kind": "critique" }, el("div", { class: "label" }, "critique ", el("span", { class: "muted" }, m.critiques.map((c) => `round ${c.round}: ${c.verdict}`).join(" · "))), track));
  }
  if (m.deadline) {
    box.append(el("div", { class: "lane", "data-kind": "deadline" }, el("div", { class: "label" }, "deadline ", el("span", { class: "muted" }, "timed out: " + m.deadline.timed_out.join(", "))),
      el("div", { class: "track" }, el("span", { class: "mark fallback", style: `left:${x(m.deadline.t)}` }, "⏱"))));
  }
  if (m.synthesis) {
    const s = m.synthesis;
    box.append(el("div", { class: "lane synthesis", "data-kind": "synthesis", "data-status": s.status || "" },
      el("div", { class: "label" }, "synthesis ", el("span", { class: "muted" }, `${s.status} · ${s.final_reason ? band(s.final_reason) : ""} · ${pct(s.response_confidence)} · ${s.citations} citations`)),
      el("div", { class: "track" }, el("span", { class: "dot", style: `left:${x(s.t)}` }))));
  }
  if (m.final) {
    box.append(el("div", { class: "lane final", "data-kind": "final" },
      el("div", { class: "label" }, "final ", el("span", { class: "muted" }, `${m.final.status} in ${m.final.total_latency_ms} ms`)),
      el("div", { class: "track" }, el("span", { class: "dot", style: `left:${x(m.final.t)}` }))));
  }
}

function drawRoute(m) {
  const box = $("route");
  box.replaceChildren();
  if (!m.route) return;
  const r = m.route;
  box.append(el("div", { class: "lane", "data-kind": "route", "data-intent": r.intent },
    el("div", { class: "label" }, "route → ", el("b", {}, r.intent), ` ${pct(r.confidence)}`, r.ambiguity_flag ? " (ambiguous)" : "", el("span", { class: "muted" }, ` · ${r.stage || ""}`)),
    el("div", {}, ...(r.alternatives || []).map((a) =>
      el("div", { class: "alt" + (a.intent === r.intent ? " chosen" : "") },
        el("span", { class: "name" }, a.intent), el("span", { class: "meter", style: `width:${Math.max(2, Math.round(a.score * 200))}px` }), pct(a.score))))));
  if (m.plan) {
    const stages = (m.plan.stages || []).map((s) => s.join(" + ")).join("  →  ");
    box.append(el("div", { class: "lane", "data-kind": "plan" }, el("div", { class: "label" }, "plan" + (m.plan.pipeline ? ` (${m.plan.pipeline})` : "")), el("div", { class: "mono" }, stages)));
  }
}

// ---- recent queries and the routing table --------------------------------------------------

async function loadRecent() {
  const res = await api("GET", "/v1/queries?limit=20");
  const list = $("recent");
  if (res.status !== 200) { list.replaceChildren(el("li", { class: "error" }, errorText(res))); return; }
  const rows = res.json.queries || [];
  if (!rows.length) { list.replaceChildren(el("li", { class: "muted" }, "no queries yet")); return; }
  list.replaceChildren(...rows.map((q) =>
    el("li", { "data-query-id": q.query_id, onclick: () => follow(q.query_id), title: q.query_id },
      el("span", { class: "q" }, q.question), " ",
      el("span", { class: "muted" }, `${q.intent} · ${q.outcome || q.status} · ${new Date(q.accepted_at).toLocaleTimeString()}`))));
}

async function loadRoutes() {
  const res = await api("GET", "/v1/manifest/routes");
  const box = $("routes");
  if (res.status !== 200) { box.replaceChildren(el("p", { class: "error" }, errorText(res))); return; }
  const t = res.json;
  const rows = [];
  for (const r of t.routes) {
    r.agents.forEach((a, i) => rows.push(el("tr", { "data-intent": r.intent },
      i === 0 ? el("td", { rowspan: String(r.agents.length) }, el("b", {}, r.intent), el("div", { class: "muted" }, r.mode + (r.required_role ? ` · role ${r.required_role}` : ""))) : null,
      el("td", {}, a.agent), el("td", {}, a.role), el("td", {}, "T" + a.tier),
      el("td", {}, a.timeout_ms !== null ? `${a.timeout_ms} ms` : "variable"), el("td", {}, String(a.max_retries)), el("td", {}, a.fallback))));
  }
  box.replaceChildren(
    el("p", { class: "muted" }, `${t.manifest} · ${t.routes.length} intents · ` + t.tiers.map((x) => `T${x.tier} ${x.name} ${x.timeout_ms !== null ? x.timeout_ms + " ms" : "variable"}`).join(" · ")),
    el("table", {}, el("thead", {}, el("tr", {}, ...["intent", "agent", "role", "tier", "timeout", "retries", "fallback"].map((h) => el("th", {}, h)))), el("tbody", {}, ...rows)));
}

$("refresh").addEventListener("click", loadRecent);
$("user").addEventListener("change", () => { loadRecent(); loadRoutes(); });
$("roles").addEventListener("change", loadRoutes);
setInterval(() => { if (current && !model(current.events).final) draw(); }, 250);
loadRecent();
loadRoutes();
