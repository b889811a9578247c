// trialgrid view: the whole front end. No framework, no build step.
// Every value from an output is put on the page as text (textContent / text nodes), never as markup.
// The view's state (run, filters, sort, page, trial) lives in the URL's hash, so a view can be shared.
"use strict";

const main = document.getElementById("main");
const POLL_MS = 1500;          // how often a live run's list asks again
let pollTimer = null;
const runCache = new Map();    // run index -> its columns, fetched once per page load

// -- small helpers --------------------------------------------------------------------------------------------
function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "href") node.setAttribute("href", "#" + String(value).replace(/^#/, "")); // only our routes
    else node.setAttribute(key, String(value));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
function show(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.length ? value.map(show).join(", ") : "[]";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}
// a flag coloured by what it means, as its probe declares (good_rates): red the unwanted value, green the wanted
function meaning(good, column, value) {
  if (typeof value !== "boolean") return undefined;
  return good.includes(column) ? (value ? "good" : "hit") : (value ? "hit" : undefined);
}
const LEGEND = "red: what the probe counts against the model (decoy_called true, expected_called false); " +
               "green: what it wants (expected_called true)";
let keyHandler = null;              // the list's keyboard (j / k / Enter), replaced with each view
function onKeys(handler) {
  if (keyHandler) document.removeEventListener("keydown", keyHandler);
  keyHandler = handler;
  if (handler) document.addEventListener("keydown", handler);
}
function pretty(args) {            // a tool call's arguments, pretty-printed when they parse
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
}
function route(parts, params) {
  const qs = params && params.toString();
  return "/" + parts.map(p => encodeURIComponent(String(p))).join("/") + (qs ? "?" + qs : "");
}
function here() {
  const hash = location.hash.slice(1) || "/";
  const cut = hash.indexOf("?");
  const path = cut < 0 ? hash : hash.slice(0, cut);
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent),
           params: new URLSearchParams(cut < 0 ? "" : hash.slice(cut + 1)) };
}
function listParams(params) {     // the params that select a list (not the page's own position)
  const out = new URLSearchParams();
  for (const [k, v] of params) if (/^[fznx]\./.test(k) || ["q", "sort", "desc"].includes(k)) out.append(k, v);
  return out;
}
function filterParams(filter) {   // {"f.model": ["a"], ...} -> URLSearchParams
  const out = new URLSearchParams();
  for (const [k, values] of Object.entries(filter)) for (const v of values) out.append(k, v);
  return out;
}
async function api(path, params) {
  if (EMBEDDED) return offline(path, params || new URLSearchParams());
  const qs = params && params.toString();
  const response = await fetch("api/" + path + (qs ? "?" + qs : ""));
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || String(response.status));
  return body;
}
// -- an export (`--export DIR`): the same answers as the server's, from the data embedded in the page ---------
const EMBEDDED = (() => {
  const node = document.getElementById("trialgrid-data");
  return node ? JSON.parse(node.textContent) : null;
})();
function compare(x, y, sign) {   // nulls last in either direction, as the server sorts
  if (x === null || x === undefined) return (y === null || y === undefined) ? 0 : 1;
  if (y === null || y === undefined) return -1;
  return (x < y ? -1 : x > y ? 1 : 0) * sign;
}
function selectRows(run, params) {
  const wanted = new Map();
  for (const [k, v] of params) if (k.startsWith("f.")) wanted.set(k.slice(2), [...(wanted.get(k.slice(2)) || []), v]);
  let rows = run.rows.filter(r => [...wanted].every(([c, values]) => {
    const v = r[c];
    if (v === null || v === undefined) return false;
    return Array.isArray(v) ? v.some(x => values.includes(String(x))) : values.includes(String(v));
  }));
  const absent = v => v === null || v === undefined;
  const excluded = new Map();
  for (const [k, v] of params) if (k.startsWith("x.")) excluded.set(k.slice(2), [...(excluded.get(k.slice(2)) || []), v]);
  rows = rows.filter(r => [...excluded].every(([c, values]) => {
    const v = r[c];
    if (absent(v)) return true;
    return !(Array.isArray(v) ? v.some(x => values.includes(String(x))) : values.includes(String(v)));
  }));
  for (const [k] of params) if (k.startsWith("z.")) rows = rows.filter(r => absent(r[k.slice(2)]));
  for (const [k] of params) if (k.startsWith("n.")) rows = rows.filter(r => !absent(r[k.slice(2)]));
  const q = (params.get("q") || "").toLowerCase();
  if (q) rows = rows.filter(r => (r.response_text || "").toLowerCase().includes(q) || r._args.toLowerCase().includes(q));
  const sort = params.get("sort"), sign = params.get("desc") === "1" ? -1 : 1;
  if (sort) rows = rows.map((r, i) => [r, i]).sort(([a, i], [b, j]) => compare(a[sort], b[sort], sign) || i - j).map(([r]) => r);
  return rows;
}
function offline(path, params) {
  const parts = path.split("/").map(decodeURIComponent);
  if (parts.length === 1) return { runs: EMBEDDED.runs.map(r => r.info) };
  const run = EMBEDDED.runs[Number(parts[1])];
  if (!run) throw new Error("no such run");
  if (parts.length === 2) return { ...run.info, columns: run.columns };
  if (parts[2] === "rates") return run.rates;
  const outcomes = run.columns.outcomes.map(c => c.name);
  const snippet = r => ({ ...r, response_text: (r.response_text || "").slice(0, 240) });
  if (parts[2] === "compare") {
    const same = run.rows.filter(r => r.probe === params.get("probe") && r.case_id === params.get("case_id")
                                      && r.condition === params.get("condition"));
    const models = [...new Set(same.map(r => r.model))].sort();
    return { outcomes, models: models.map(m => ({ model: m, trials: same.filter(r => r.model === m)
      .sort((a, b) => a.run - b.run).slice(0, 5) })) };
  }
  const list = selectRows(run, params);
  if (parts.length === 3 && parts[2] === "count") return { total: list.length };
  if (parts.length === 3) {
    const offset = Number(params.get("offset") || 0), limit = Number(params.get("limit") || 50);
    return { total: list.length, offset, outcomes, good_rates: run.columns.good_rates || [],
             rows: list.slice(offset, offset + limit).map(snippet) };
  }
  const detail = run.details[parts[3]];
  if (!detail) throw new Error("no such trial");
  const pos = list.findIndex(r => r.trial_id === parts[3]);
  return { ...detail, around: { pos: pos < 0 ? null : pos, prev: pos > 0 ? list[pos - 1].trial_id : null,
                                next: pos >= 0 && pos + 1 < list.length ? list[pos + 1].trial_id : null } };
}

function setWhere(...kids) { document.getElementById("where").replaceChildren(...kids); }
function setStatus(text) { document.getElementById("status").textContent = text; }

// -- runs -----------------------------------------------------------------------------------------------------
async function runsView() {
  const data = await api("runs");
  setWhere("runs");
  const rows = data.runs.map(r => el("tr", { "data-run": r.index },
    el("td", {}, el("a", { href: route(["run", r.index]) }, r.label)),
    el("td", {}, r.status + (r.live ? " (live)" : "")),
    el("td", {}, `${r.trials} of ${show(r.trials_total)}`), el("td", {}, r.errors),
    el("td", {}, `${r.input_tokens} in / ${r.output_tokens} out`),
    el("td", {}, r.cost_usd === null ? "—" : "$" + r.cost_usd.toFixed(4)),
    el("td", {}, el("a", { href: route(["run", r.index, "rates"]) }, "rates")),
    el("td", {}, el("details", {}, el("summary", {}, r.sweep_name || "sweep"),
                    el("pre", {}, JSON.stringify(r.settings, null, 2))))));
  main.replaceChildren(el("h2", {}, "Runs"), el("table", { class: "runs" },
    el("tr", {}, ["run", "status", "trials", "errors", "tokens", "cost", "numbers", "settings"].map(h => el("th", {}, h))),
    rows));
}

// -- the trial list -------------------------------------------------------------------------------------------
async function runInfo(run) {
  if (!runCache.has(run)) runCache.set(run, await api(`runs/${run}`));
  return runCache.get(run);
}
function filterControl(column, params, apply) {
  const key = "f." + column.name, current = params.get(key);
  let input;
  const values = column.kind === "bool" ? ["true", "false"] : column.values;
  if (values) {
    input = el("select", { name: key }, el("option", { value: "" }, "any"),
      values.map(v => el("option", { value: v }, v)), el("option", { value: "\u0000null" }, "(none)"));
    input.value = params.has("z." + column.name) ? "\u0000null" : (current ?? "");
  } else {
    input = el("input", { name: key, size: 10 });
    input.value = current ?? "";
  }
  input.addEventListener("change", () => apply(column.name, input.value));
  return el("label", {}, column.name, input);
}
async function listView(run, params) {
  // the rows do not wait for the filter controls (their values take a scan of the output): both are asked at once
  const asking = runInfo(run);
  asking.catch(() => {});   // awaited below; this only keeps an early failure from being reported twice
  const apply = (name, value) => {
    const next = new URLSearchParams(params);
    next.delete("f." + name); next.delete("z." + name); next.delete("offset");
    if (value === "\u0000null") next.set("z." + name, "1");
    else if (value !== "") next.set("f." + name, value);
    location.hash = route(["run", run], next);
  };
  const search = el("input", { name: "q", type: "search", size: 24, placeholder: "reply or call arguments" });
  search.value = params.get("q") || "";
  search.addEventListener("change", () => {
    const next = new URLSearchParams(params); next.delete("offset");
    if (search.value) next.set("q", search.value); else next.delete("q");
    location.hash = route(["run", run], next);
  });
  const filters = el("div", { class: "filters" }, el("label", {}, "text", search));
  const heading = el("h2", {}, "Trials");
  // filters a control above does not show (from a number's link): a rate's denominator, an excluded value
  const hidden = [...params].filter(([k]) => /^[nx]\./.test(k));
  const clear = new URLSearchParams([...params].filter(([k]) => !/^[nx]\./.test(k) && k !== "offset"));
  const also = hidden.length ? el("div", { class: "muted", id: "also" }, "and: ",
    hidden.map(([k, v]) => k.startsWith("n.") ? `${k.slice(2)} is set` : `${k.slice(2)} is not ${v}`).join(", "), " ",
    el("a", { href: route(["run", run], clear) }, "(drop these)")) : "";
  const count = el("span", { id: "count" });
  const table = el("table", { class: "trials" });
  const pager = el("div", { class: "pager" });
  // every filter, search and excluded value dropped at once; the sort and page size stay
  const filtered = [...params].some(([k]) => /^[fznx]\./.test(k) || k === "q");
  const kept = new URLSearchParams([...params].filter(([k]) => k === "sort" || k === "desc" || k === "limit"));
  const reset = filtered ? el("a", { href: route(["run", run], kept), id: "clear-filters" }, "clear filters") : "";
  main.replaceChildren(heading, filters, also, el("div", {}, count, " trials ", reset), pager,
                       el("div", { class: "scroll" }, table),
                       el("p", { class: "muted legend" }, LEGEND, " · j / k to move, Enter to open"));
  const draw = async () => {
    // the rows first (a slice: the server stops reading once it has them), the count beside them
    const counting = api(`runs/${run}/count`, params);
    const asked = new URLSearchParams(params); asked.set("count", "0");
    const page = await api(`runs/${run}/trials`, asked);
    if (!count.textContent) count.textContent = "…";
    // the flags as columns; lists and labels (catalogue orders, evidence) are in each trial's detail
    const flags = page.outcomes.filter(o => page.rows.every(r => r[o] === null || typeof r[o] === "boolean"));
    // which tools the model called, where the probe records it (the flags say what that meant)
    const called = page.outcomes.filter(o => o === "tools_called");
    const columns = ["trial_id", "model", "case_id", "condition", "run", ...called, "status", "error_kind", ...flags,
                     "response_text"];
    const good = page.good_rates || [];
    const sort = params.get("sort"), desc = params.get("desc") === "1";
    const header = el("tr", {}, columns.map(c => el("th", { class: "sortable", title: "sort by " + c, onclick: () => {
      const next = new URLSearchParams(params);
      next.set("sort", c); if (sort === c && !desc) next.set("desc", "1"); else next.delete("desc");
      next.delete("offset");
      location.hash = route(["run", run], next);
    } }, c + (sort === c ? (desc ? " ▼" : " ▲") : ""))));
    const rows = page.rows.map((r, i) => {
      const detail = new URLSearchParams(listParams(params)); detail.set("pos", String(page.offset + i));
      const href = route(["run", run, "trial", r.trial_id], detail);
      // the id is a real link (a new tab, a copied address); the rest of the row opens the trial too
      return el("tr", { class: "trial", "data-trial": r.trial_id, "data-href": href,
                        onclick: e => { if (!e.target.closest("a")) location.hash = href; } },
        columns.map(c => el("td", { class: meaning(good, c, r[c]) },
                            c === "trial_id" ? el("a", { href }, r.trial_id) : show(r[c]))));
    });
    table.replaceChildren(header, ...rows);
    let at = -1;
    const select = i => {
      if (!rows.length) return;
      at = Math.max(0, Math.min(rows.length - 1, i));
      rows.forEach((row, j) => row.classList.toggle("selected", j === at));
      rows[at].scrollIntoView({ block: "nearest" });
    };
    onKeys(e => {
      if (e.target.closest("input, select, textarea") || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === "j") select(at + 1);
      else if (e.key === "k") select(at - 1);
      else if (e.key === "Enter" && at >= 0) location.hash = rows[at].dataset.href;
    });
    const limit = Number(params.get("limit") || 50), offset = page.offset;
    const to = off => { const next = new URLSearchParams(params); next.set("offset", String(off)); return route(["run", run], next); };
    const total = (await counting).total;
    count.textContent = String(total);
    pager.replaceChildren(
      offset > 0 ? el("a", { href: to(Math.max(0, offset - limit)), id: "prev-page" }, "‹ previous") : "",
      ` ${total ? offset + 1 : 0}–${offset + page.rows.length} `,
      offset + limit < total ? el("a", { href: to(offset + limit), id: "next-page" }, "next ›") : "");
  };
  await draw();
  const info = await asking;
  setWhere(el("a", { href: route([]) }, "runs"), " / ", info.label, " / ",
           el("a", { href: route(["run", run, "rates"]) }, "rates"));
  heading.textContent = "Trials of " + info.label;
  filters.append(...[...info.columns.common, ...info.columns.outcomes].map(c => filterControl(c, params, apply)));
  const runs = await api("runs");
  if (runs.runs[run] && runs.runs[run].live) {   // a run still being written: ask again while the view stays
    const view = location.hash;
    const poll = async () => {
      if (location.hash !== view) return;
      try { await draw(); setStatus("live: updated " + new Date().toLocaleTimeString()); }
      catch (e) { setStatus("live: " + e.message); }
      pollTimer = setTimeout(poll, POLL_MS);
    };
    pollTimer = setTimeout(poll, POLL_MS);
  }
}

// -- one trial ------------------------------------------------------------------------------------------------
function toolCall(c) {
  return el("div", { class: "toolcall", "data-role": "tool-call" },
    el("b", {}, c.name), c.id ? el("span", { class: "muted" }, " id ", c.id) : "",
    el("pre", { "data-field": "arguments" }, pretty(c.arguments)),
    c.parse_error ? el("div", { class: "err" }, "arguments do not parse: ", c.parse_error) : "",
    el("details", {}, el("summary", {}, "raw arguments, as sent"), el("pre", { "data-field": "raw-arguments" }, c.arguments)));
}
function message(m) {
  return el("div", { class: "message", "data-role": "message", "data-message-role": m.role },
    el("div", { class: "role" }, m.role, m.name ? ` (${m.name})` : "", m.tool_call_id ? ` for ${m.tool_call_id}` : ""),
    el("pre", { "data-field": "content" }, m.content), m.tool_calls.map(toolCall));
}
function callView(call, i) {
  const req = call.request, resp = call.response;
  return el("section", { class: "call", "data-role": "call" },
    el("h3", {}, `call ${i + 1}`, el("span", { class: "muted" },
      ` · attempts ${call.attempts} · ${call.latency_ms.toFixed(1)} ms`)),
    call.error ? el("div", { class: "err" }, call.error_kind || "error", ": ", call.error) : "",
    el("div", { class: "request" }, req.messages.map(message)),
    el("details", {}, el("summary", {}, `${req.tools.length} tools offered, in this order`),
      el("ol", {}, req.tools.map(t => el("li", {}, el("b", {}, t.name), " ", t.description,
        el("pre", {}, JSON.stringify(t.parameters, null, 2)))))),
    el("div", { class: "muted" }, `seed ${show(req.seed)} · tool choice ${show(req.tool_choice)} · params ${JSON.stringify(req.params)}`),
    resp === null ? el("div", { class: "err" }, "no response") :
      el("div", { class: "response", "data-role": "response" },
        el("div", { class: "message" }, el("div", { class: "role" }, "response",
          el("span", { class: "muted" }, ` · finish ${show(resp.finish_reason)} · ${resp.input_tokens} in / ${resp.output_tokens} out`
            + (resp.cached ? " · cached" : "") + (resp.remedies.length ? " · remedies " + resp.remedies.join(", ") : ""))),
          el("pre", { "data-field": "reply" }, resp.text), resp.tool_calls.map(toolCall))));
}
function fieldTable(row, names, cls, good = []) {
  return el("table", { class: cls }, names.filter(n => n in row).map(n =>
    el("tr", {}, el("th", {}, n), el("td", { "data-column": n, class: meaning(good, n, row[n]) }, show(row[n])))));
}
function whyView(why) {           // the verdict's reasons: what fired, what it means, the evidence recorded
  if (!why) return "";
  const item = e => el("li", { "data-why": e.column }, el("b", {}, e.column), " = ", show(e.value),
                       e.meaning ? el("span", { class: "muted" }, " — ", e.meaning) : "");
  return el("div", { class: "why" },
    el("p", {}, why.fired.length ? "What fired:" : "Nothing fired: every rate of this trial is a non-event."),
    why.fired.length ? el("ul", { class: "fired" }, why.fired.map(item)) : "",
    why.evidence.length ? [el("p", {}, "Evidence the probe recorded:"), el("ul", { class: "evidence" }, why.evidence.map(item))] : "",
    why.quiet.length ? el("details", {}, el("summary", {}, `${why.quiet.length} rates that did not fire`),
                                        el("ul", { class: "quiet" }, why.quiet.map(item))) : "");
}
function caseView(c) {
  if (!c) return el("p", { class: "muted", id: "case" }, "the case file is not readable from here");
  return el("div", { id: "case" },
    el("p", { class: c.matches_run ? "muted" : "err" }, c.source, c.matches_run
      ? " (its sha256 is the one the run recorded)" : " (edited since the run: its sha256 differs from the run's)"),
    el("pre", { "data-field": "case" }, JSON.stringify(c.record, null, 2)));
}
async function trialView(run, trialId, params) {
  const info = await runInfo(run);
  const data = await api(`runs/${run}/trials/${encodeURIComponent(trialId)}`, params);
  const row = data.row, around = data.around;
  const list = listParams(params);
  const step = (id, pos) => { const p = new URLSearchParams(list); p.set("pos", String(pos)); return route(["run", run, "trial", id], p); };
  const compare = new URLSearchParams({ probe: row.probe, case_id: row.case_id, condition: row.condition });
  setWhere(el("a", { href: route([]) }, "runs"), " / ", el("a", { href: route(["run", run], list), id: "back" }, info.label),
           " / trial ", trialId);
  main.replaceChildren(
    el("div", { class: "pager" },
      around.prev ? el("a", { href: step(around.prev, around.pos - 1), id: "prev" }, "‹ previous") : el("span", { class: "muted" }, "first"),
      around.pos === null ? "" : ` ${around.pos + 1} in this list `,
      around.next ? el("a", { href: step(around.next, around.pos + 1), id: "next" }, "next ›") : el("span", { class: "muted" }, "last"),
      el("a", { href: route(["run", run, "compare"], compare), id: "compare" }, "compare models on this case")),
    el("h2", {}, `${row.model} · ${row.probe} · ${row.case_id} · ${row.condition} · run ${row.run}`),
    // the exchange first, the verdict beside it; what the trial was made of folded below
    el("div", { class: "trial-body" },
      el("div", {}, el("h3", {}, "Exchange"),
        data.calls === null
          ? el("div", { class: "transcript" }, el("p", { class: "muted" }, "this output records no calls; the reply:"),
              el("pre", { "data-field": "reply" }, row.response_text))
          : el("div", { class: "transcript" }, data.calls.map(callView))),
      el("aside", { class: "verdict-side" }, el("h3", {}, "Verdict"), whyView(data.why),
        fieldTable(row, data.outcomes, "verdict", data.good_rates || []), el("p", { class: "muted legend" }, LEGEND))),
    el("details", { id: "facts" }, el("summary", {}, "Trial: status, seed, attempts, tokens, cost"),
      fieldTable({ ...row, cost_usd: data.cost_usd === null ? null : "$" + data.cost_usd.toFixed(6) },
        ["trial_id", "status", "error_kind", "error", "seed", "attempts", "cache_hits", "latency_ms", "input_tokens",
         "output_tokens", "cost_usd", "remedies", "provider", "model_id", "finished_at"], "facts")),
    el("details", { id: "case-record" }, el("summary", {}, "The case as the run used it"), caseView(data.case)));
}

// -- the numbers behind the report, each leading to its trials ------------------------------------------------
function pct(v) { return v === null || v === undefined ? "—" : (100 * v).toFixed(1) + "%"; }
// an interval as the terminal report prints it: [lo, hi], empty when there is none
function span(lo, hi) {
  return lo === null || lo === undefined || hi === null || hi === undefined ? ""
    : el("span", { class: "interval muted" }, ` [${pct(lo)}, ${pct(hi)}]`);
}
async function ratesView(run) {
  const info = await runInfo(run);
  const data = await api(`runs/${run}/rates`);
  setWhere(el("a", { href: route([]) }, "runs"), " / ", el("a", { href: route(["run", run]) }, info.label), " / rates");
  const link = (filter, label, cls) => el("a", { href: route(["run", run], filterParams(filter)), class: cls }, label);
  // a count of trials: its hits and its denominator, each a link to exactly the trials it counts
  const count = c => c ? el("span", { class: "count" }, link(c.hits_filter, String(c.hits), "hits"), " of ",
                              link(c.n_filter, String(c.n), "of")) : "—";
  const table = (cls, probe, heads, rows) => el("table", { class: cls, "data-probe": probe },
    el("tr", {}, heads.map(h => el("th", {}, h))), rows);
  const sections = data.probes.map(p => {
    const parts = [el("h2", {}, `${p.probe} (${p.kind})`)];
    if (p.scorecard.length) parts.push(el("h3", {}, "Scorecard"), table("scorecard", p.probe,
      ["model", "verdict", "why", "decoy, arm A", "decoy, arm B", "grounded: expected tool", "errors"],
      p.scorecard.map(r => el("tr", { "data-model": r.model }, el("td", {}, r.model), el("td", {}, r.verdict),
        el("td", {}, r.reason),
        ["decoy_a", "decoy_b", "grounded", "errors"].map(k => el("td", { "data-number": k },
          r[k] ? [pct(r[k].rate), " · ", count(r[k])] : "—"))))));
    parts.push(el("h3", {}, "Leaderboard"), table("leaderboard", p.probe,
      ["model", "headline", "trials", "errors", "contrast", "arm A", "arm B", "difference"],
      p.leaderboard.map(r => el("tr", { "data-model": r.model }, el("td", {}, r.model), el("td", {}, r.headline),
        el("td", {}, link(r.trials_filter, String(r.trials), "trials")),
        el("td", {}, link(r.errors_filter, String(r.errors), "errors")), el("td", {}, show(r.contrast)),
        ["a", "b"].map(a => el("td", { "data-arm": a }, r.arms[a] ? [link(r.arms[a].hits_filter, pct(r.arms[a].rate), "arm"),
                                                        span(r.arms[a].lo, r.arms[a].hi), " · ", count(r.arms[a])] : "—")),
        el("td", { "data-number": "difference" }, r.difference === null ? "—" : [pct(r.difference), span(r.ci_lo, r.ci_hi)])))));
    if (p.contrasts.length) parts.push(el("h3", {}, "Contrasts"), table("contrasts", p.probe,
      ["model", "contrast", "outcome", "arm A", "arm B", "difference", "interval", "p (cell)"],
      p.contrasts.map(r => el("tr", { "data-model": r.model, "data-contrast": r.contrast }, el("td", {}, r.model),
        el("td", {}, r.contrast), el("td", {}, r.outcome),
        ["a", "b"].map(a => el("td", { "data-arm": a, title: r.arms[a].conditions.join(", ") },
          pct(r.arms[a].rate), " · ", count(r.arms[a]))),
        el("td", {}, pct(r.difference)), el("td", {}, `${pct(r.ci_lo)} to ${pct(r.ci_hi)}`), el("td", {}, r.p_cell === null ? "—" : Number(r.p_cell).toPrecision(2))))));
    parts.push(el("h3", {}, "Rates by condition: each count leads to its trials"), table("conditions", p.probe,
      ["model", "condition", "rate", "hits of trials", "value [95% interval]"],
      p.cells.map(c => el("tr", {}, el("td", {}, c.model), el("td", {}, c.condition), el("td", {}, c.rate),
        el("td", {}, count(c)), el("td", { "data-number": "value" }, pct(c.value), span(c.lo, c.hi))))));
    if (p.stages.length) parts.push(el("h3", {}, "Stages reached (that stage or a later one)"), table("stages", p.probe,
      ["model", "condition", "stage", "reached of trials"],
      p.stages.map(c => el("tr", {}, el("td", {}, c.model), el("td", {}, c.condition), el("td", {}, c.stage),
        el("td", {}, count(c))))));
    if (p.fields.length) parts.push(el("h3", {}, "Field scores (pooled over the trials every scorer scored)"),
      table("fields", p.probe, ["model", "condition", "scorer", "trials", "tp", "fp", "fn", "precision", "recall"],
        p.fields.map(c => el("tr", {}, el("td", {}, c.model), el("td", {}, c.condition), el("td", {}, c.scorer),
          el("td", {}, link(c.n_filter, String(c.n), "of")), el("td", {}, c.tp), el("td", {}, c.fp), el("td", {}, c.fn),
          el("td", {}, pct(c.precision)), el("td", {}, pct(c.recall))))));
    return el("section", {}, parts);
  });
  main.replaceChildren(...sections);
}

// -- the same case and condition across models ----------------------------------------------------------------
async function compareView(run, params) {
  const info = await runInfo(run);
  const data = await api(`runs/${run}/compare`, params);
  setWhere(el("a", { href: route([]) }, "runs"), " / ", el("a", { href: route(["run", run]) }, info.label), " / compare");
  const column = m => el("div", { "data-model": m.model }, el("h3", {}, m.model), m.trials.map(t =>
    el("div", { class: "message" },
      el("div", { class: "role" }, el("a", { href: route(["run", m.run ?? run, "trial", t.trial_id]) }, `run ${t.run}`), " ", t.status),
      fieldTable(t, data.outcomes.filter(o => t[o] !== null && t[o] !== undefined), "verdict"),
      el("pre", { "data-field": "reply" }, t.response_text))));
  main.replaceChildren(el("h2", {}, `${params.get("probe")} · ${params.get("case_id")} · ${params.get("condition")}`),
                       el("div", { class: "compare" }, data.models.map(column)));
}

// -- routing --------------------------------------------------------------------------------------------------
async function render() {
  clearTimeout(pollTimer);
  onKeys(null);
  const { parts, params } = here();
  setStatus("");
  try {
    if (parts[0] === "run" && parts.length === 2) await listView(Number(parts[1]), params);
    else if (parts[0] === "run" && parts[2] === "trial") await trialView(Number(parts[1]), parts[3], params);
    else if (parts[0] === "run" && parts[2] === "rates") await ratesView(Number(parts[1]));
    else if (parts[0] === "run" && parts[2] === "compare") await compareView(Number(parts[1]), params);
    else await runsView();
    document.body.dataset.ready = location.hash;   // tests wait on this
  } catch (e) {
    main.replaceChildren(el("p", { class: "err", id: "error" }, "could not load: ", e.message));
    document.body.dataset.ready = location.hash;
  }
}
window.addEventListener("hashchange", render);
render();
