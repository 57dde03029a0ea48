// The controls around the timeline, as in Perfetto and chrome://tracing: W/S zoom around the
// mouse, A/D pan, ? lists the keys, double-click fits the whole trace; a search box (plain
// text, or a regular expression on request) that counts matches and steps through them
// (Enter / Shift+Enter); the legend of the colours; a tooltip on each lane's name; Shift+drag
// across lanes and time for a table of what ran there; a details panel for a clicked event
// (filled by timeline-tap.js); groups of lanes that collapse into their header's row and
// expand again (a click on the header, or C over the group), as in Perfetto.
// Runs after timeline-helpers.js as a bokeh CustomJS on each layout of the lanes' figure: it
// fits the lane names to a fifth of the width every time, and builds the controls once. They
// are plain elements beside bokeh's root; every text from the trace goes in as textContent.
const view = window.Bokeh && Bokeh.index ? Bokeh.index.find_one(main) : null;
if (view == null) return;
let root = view;
while (root.parent != null) root = root.parent;
const host = root.el, box = host.parentNode;
if (box == null) return;
const frame = () => view.frame.bbox;
const plot_rect = () => view.el.getBoundingClientRect();

// lane names: short, cut with an ellipsis to about a fifth of the figure's width; a group's
// header says whether it is expanded (\u25be) or collapsed (\u25b8, with its lane count); a
// lane whose events the whole-trace view draws none of keeps its note whole (meta.tick_notes)
const axis = main.left[0], nl = meta.lanes.length;
if (main.__pl_collapsed == null) main.__pl_collapsed = new Set();
const collapsed = main.__pl_collapsed;
function members(h) {
  const out = [];
  for (let k = 0; k < nl; k++) { if (k !== h && meta.group_of[k] === h) out.push(k); }
  return out;
}
function tick_text(k, chars) {
  const cut = (t, n) => t.length <= n ? t : t.slice(0, Math.max(n - 1, 1)).trimEnd() + "\u2026";
  let t = meta.ticks[k], note = "";
  if (meta.headers[k]) {
    t = (collapsed.has(k) ? "\u25b8 " : "\u25be ") + t;
    if (collapsed.has(k)) note = " " + members(k).length + " lanes";
  } else if (meta.tick_notes[k]) note = " \u00b7 " + meta.tick_notes[k];
  return note ? cut(t, Math.max(4, chars - note.length)) + note : cut(t, chars);
}
function label_axis(force) {
  const chars = Math.max(8, Math.floor(view.el.clientWidth / 5 / 6.6));
  if (main.__pl_chars === chars && !force) return;
  main.__pl_chars = chars;
  const over = new Map(), lanes = main.__pl_rows ? main.__pl_rows.lane : meta.lanes.map((_, k) => k);
  lanes.forEach((k, row) => over.set(row, tick_text(k, chars)));  // keyed by tick value
  axis.setv({major_label_overrides: over}, {sync: false});
}
label_axis(false);
if (main.__pl_ui) return;

// -- collapsing groups -------------------------------------------------------------------------
// A collapsed group keeps only its header's row (its name and lane count, no events); the
// lanes below move up and the figure shrinks. Every script reads the rows from main.__pl_rows
// (see timeline-helpers.js) and redraws on the range's change signal.
function relayout() {
  const row = new Int32Array(nl), hid = new Uint8Array(nl), lane = [];
  for (let k = 0; k < nl; k++) {
    const h = meta.group_of[k];
    if (h >= 0 && h !== k && collapsed.has(h)) { row[k] = row[h]; hid[k] = 1; }
    else { row[k] = lane.length; lane.push(k); }
  }
  main.__pl_rows = {row: row, hidden: hid, lane: lane};
  const n = lane.length, heads = [], gpu = [];
  for (let r = 0; r < n; r++) {
    if (meta.headers[lane[r]]) heads.push(r);
    else if (meta.gpu[lane[r]]) gpu.push(r);
  }
  bands.setv({data: {bottom: heads.map((r) => r + 0.5), top: heads.map((r) => r - 0.5)}}, {sync: false});
  gpu_bands.setv({data: {bottom: gpu.map((r) => r - 0.45), top: gpu.map((r) => r + 0.45)}}, {sync: false});
  main.y_range.setv({start: n - 0.5, end: -0.5}, {sync: false});
  axis.ticker.setv({ticks: lane.map((_, r) => r)}, {sync: false});
  label_axis(true);
  main.setv({height: Math.max(160, n * meta.lane_px + 60)}, {sync: false});
  xr.properties.start.change.emit();  // every script drawing on the time axis redraws
  // bokeh builds the axis's new label views asynchronously, after this layout: once more
  setTimeout(() => view.request_layout(), 0);
}
function toggle_group(h) {
  if (h == null || h < 0 || !meta.headers[h]) return;
  if (collapsed.has(h)) collapsed.delete(h); else collapsed.add(h);
  relayout();
}
const group_at = (lane) => lane == null ? -1 : meta.group_of[lane];

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}
// the keys' hint under the time axis: only this page answers keys (a static picture of the
// figure keeps the plain axis title)
const time_axis = main.below.find((a) => a.axis_label != null);
if (time_axis) {
  time_axis.setv({axis_label: time_axis.axis_label + " (W/S zoom, A/D pan, Shift+drag: what ran "
    + "there, click: details, ?: keys)"}, {sync: false});
}
if (getComputedStyle(box).position === "static") box.style.position = "relative";
const style = el("style");
style.textContent = css;
const bar = el("div", "pl-tl-bar"), after = el("div", "pl-tl-panels");
box.insertBefore(style, host);
box.insertBefore(bar, host);
host.after(after);

// -- the time axis -------------------------------------------------------------------------
const lo = -0.02 * meta.span, hi = 1.02 * meta.span, least = Math.max(meta.span * 1e-7, 1e-6);
function set_range(a, b) {
  let w = Math.max(b - a, least);
  w = Math.min(w, hi - lo);
  a = Math.min(Math.max(a, lo), hi - w);
  xr.setv({start: a, end: a + w});
}
let mouse = null;  // the time under the pointer, while it is over the plot
function time_at(cx) {
  const r = plot_rect(), f = frame(), sx = cx - r.left;
  return sx >= f.left && sx <= f.right ? view.frame.x_scale.invert(sx) : null;
}
function lane_at(cy) {
  const r = plot_rect(), f = frame(), sy = cy - r.top;
  if (sy < f.top || sy > f.bottom) return null;
  return lane_of_row(Math.round(view.frame.y_scale.invert(sy)));
}
function lane_of_row(r) {  // the lane drawn in row r (a collapsed group's row: its header)
  const lanes = main.__pl_rows ? main.__pl_rows.lane : null, n = lanes ? lanes.length : nl;
  if (r < 0 || r >= n) return null;
  return lanes ? lanes[r] : r;
}
function zoom(factor) {
  const a = xr.start, b = xr.end, at = mouse != null && mouse >= a && mouse <= b ? mouse : (a + b) / 2;
  set_range(at - (at - a) * factor, at + (b - at) * factor);
}
function pan(share) {
  const w = xr.end - xr.start;
  set_range(xr.start + share * w, xr.end + share * w);
}
const fit = () => set_range(0, meta.span);

// -- keys ----------------------------------------------------------------------------------
const help = el("div", "pl-tl-help");
help.hidden = true;
help.append(el("b", null, "Keys and mouse"));
for (const [k, what] of [
  ["W / S", "zoom in / out around the mouse"], ["A / D", "pan left / right"],
  ["wheel", "zoom"], ["drag", "pan"], ["double-click", "fit the whole trace"],
  ["click", "details of an event and its launch link"],
  ["Shift+drag", "what ran in that time on those lanes"],
  ["click a group's name", "collapse / expand its lanes"],
  ["C", "collapse / expand the group under the mouse"],
  ["Enter / Shift+Enter", "(in the search box) next / previous match"],
  [".*", "(beside the search box) search by regular expression, not plain text"],
  ["Esc", "close panels"], ["?", "this list"],
]) {
  const row = el("div", "pl-tl-help-row");
  row.append(el("kbd", null, k), el("span", null, what));
  help.append(row);
}
box.append(help);
const editable = (e) => e != null && (e.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(e.tagName));
host.tabIndex = 0;
host.style.outline = "none";
host.setAttribute("data-lm-suppress-shortcuts", "true");  // JupyterLab: keys are the plot's
host.addEventListener("pointerenter", () => {
  if (!editable(document.activeElement)) host.focus({preventScroll: true});
});
host.addEventListener("pointerdown", () => host.focus({preventScroll: true}));
host.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const k = ev.key.toLowerCase(), step = ev.repeat ? 0.85 : 0.7;
  if (k === "w") zoom(step);
  else if (k === "s") zoom(1 / step);
  else if (k === "a") pan(-0.15);
  else if (k === "d") pan(0.15);
  else if (k === "?") help.hidden = !help.hidden;
  else if (k === "c") toggle_group(group_at(pointer_lane));
  else if (k === "escape") { help.hidden = true; details.hidden = true; chosen.hidden = true; band.hidden = true; }
  else return;
  ev.preventDefault();
  ev.stopPropagation();
});
host.addEventListener("dblclick", (ev) => { if (time_at(ev.clientX) != null) fit(); });

// -- lane names' tooltip -----------------------------------------------------------------
const tip = el("div", "pl-tl-tip");
tip.hidden = true;
box.append(tip);
let pointer_lane = null;  // the lane under the pointer (on the plot or its name)
host.addEventListener("pointermove", (ev) => {
  mouse = time_at(ev.clientX);
  const r = plot_rect(), f = frame(), sx = ev.clientX - r.left, lane = lane_at(ev.clientY);
  pointer_lane = sx >= 0 && sx <= f.right ? lane : null;
  if (sx >= 0 && sx < f.left && lane != null) {
    const b = box.getBoundingClientRect();
    tip.textContent = meta.lane_info[lane];
    tip.style.left = (ev.clientX - b.left + 14) + "px";
    tip.style.top = (ev.clientY - b.top + 12) + "px";
    tip.hidden = false;
  } else tip.hidden = true;
});
host.addEventListener("pointerleave", () => { mouse = null; pointer_lane = null; tip.hidden = true; });
// a click (not a drag) on a group's header row, on its name or across the plot, toggles it
let pressed = null;
host.addEventListener("pointerdown", (ev) => { pressed = [ev.clientX, ev.clientY]; });
host.addEventListener("click", (ev) => {
  if (ev.shiftKey || pressed == null) return;
  if (Math.abs(ev.clientX - pressed[0]) + Math.abs(ev.clientY - pressed[1]) > 4) return;
  const r = plot_rect(), f = frame(), sx = ev.clientX - r.left, lane = lane_at(ev.clientY);
  if (sx >= 0 && sx <= f.right && lane != null && meta.headers[lane]) toggle_group(lane);
});

// -- search --------------------------------------------------------------------------------
// Plain text by default: a name matches when it contains the text, in any case. A regular
// expression only on request (the .* toggle, kept while the page is open), matched in a Web
// Worker (timeline-search-worker.js, given as worker_code) that is ended after REGEX_MS: a
// pattern that backtracks without end, even half-typed, never freezes the page. Where no
// worker can be started the regex is refused, never run on the page's own thread.
const REGEX_MS = 500, START_MS = 5000;
const TOO_SLOW = "pattern took too long (over " + REGEX_MS / 1000 + " s); "
  + "plain text search is the default";
const NO_WORKER = "regex search needs a Web Worker, which this page cannot start; "
  + "plain text search is the default";
const search = el("input", "pl-tl-search");
search.type = "search";
search.setAttribute("aria-label", "search event names");
const regex_btn = el("button", "pl-tl-btn pl-tl-regex", ".*");
regex_btn.title = "regular expression (off: plain text, any case)";
const count = el("span", "pl-tl-count");
count.setAttribute("aria-busy", "false");  // true from a keystroke until its answer is shown
const note = el("span", "pl-tl-search-note");  // why a regex was refused
note.setAttribute("role", "status");
const prev = el("button", "pl-tl-btn", "\u25c0"), next = el("button", "pl-tl-btn", "\u25b6");
prev.title = "previous match (Shift+Enter)";
next.title = "next match (Enter)";
const keys_btn = el("button", "pl-tl-btn", "?");
keys_btn.title = "keys and mouse";
keys_btn.addEventListener("click", () => { help.hidden = !help.hidden; });
bar.append(search, regex_btn, prev, next, count, note, keys_btn);
let regex_on = false;
function show_mode() {
  regex_btn.setAttribute("aria-pressed", String(regex_on));
  search.placeholder = regex_on ? "search names (regular expression)" : "search names (text)";
}
show_mode();
let matches = [], at = -1, total = 0, pending = null;
let asked = null, answered = null, step_wanted = 0;  // the last searches run and shown
const search_key = () => (regex_on ? "regex:" : "text:") + search.value.trim();
function run_search() {
  clearTimeout(pending);
  const text = search.value.trim(), key = search_key();
  asked = key;
  stop_regex();
  if (!text || !regex_on) { show_hits(key, text ? plain_hits(text) : []); return; }
  count.setAttribute("aria-busy", "true");
  regex_hits(text, (hits) => show_hits(key, hits), (why) => refuse(key, why));
}
function plain_hits(text) {
  const want = text.toLowerCase(), all = name_list.data.text, hits = [];
  for (let i = 0; i < all.length; i++) { if (all[i].toLowerCase().includes(want)) hits.push(i); }
  return hits;
}
function show_hits(key, hits) {  // hits: indexes into the name list
  matches = []; at = -1; total = 0; answered = key;
  note.textContent = "";
  count.setAttribute("aria-busy", "false");
  if (!search.value.trim()) { query.setv({data: {label: [], current: []}}); count.textContent = ""; return; }
  const counts = name_list.data.count, hit = new Set(hits);
  if (counts) { for (const i of hit) total += counts[i]; }
  const labs = [];
  for (let lab = 0; lab < lt.name.length; lab++) { if (hit.has(lt.name[lab])) labs.push(lab); }
  const want = new Set(labs), E = events.data;
  for (let e = 0; e < E.start.length; e++) { if (want.has(E.label[e])) matches.push(e); }
  matches.sort((a, b) => E.start[a] - E.start[b]);
  query.setv({data: {label: labs, current: []}});
  show_count();
  const by = step_wanted;
  step_wanted = 0;
  if (by) step(by);
}
function refuse(key, why) {
  show_hits(key, []);
  count.textContent = "";
  note.textContent = why;
}
function show_count() {
  const n = matches.length;
  let text = n ? (at >= 0 ? (at + 1) + " of " : "") + n.toLocaleString() + (n === 1 ? " match" : " matches")
               : "no match";
  if (total > n) text += " (" + total.toLocaleString() + " in the trace; the page holds the longest)";
  count.textContent = text;
}
function step(by) {
  if (!matches.length) return;
  at = at < 0 ? (by > 0 ? 0 : matches.length - 1) : (at + by + matches.length) % matches.length;
  const E = events.data, e = matches[at], l = E.start[e], dur = E.dur[e];
  if (collapsed.has(group_at(E.lane[e]))) toggle_group(group_at(E.lane[e]));  // to show it
  let w = xr.end - xr.start;
  if (dur > 0.8 * w) w = dur * 1.25;
  set_range(l + dur / 2 - w / 2, l + dur / 2 + w / 2);
  query.setv({data: {label: query.data.label, current: [0, e]}});
  show_count();
  // the current match is the selected event, as a click would make it: its launch link
  // highlighted and its details in the panel
  const info = event_details(E, e);
  show_link(info);
  show_details(info);
}

// The regex worker: started on the first regex search, ended (and started again on the next
// one) when a pattern runs past its time or a new search comes while it still matches.
const rx_state = {url: null, worker: null, names: null, sent: 0, job: null, id: 0, timer: null,
                  refused: false};  // refused: this page cannot start one (not tried again)
function regex_worker() {
  if (rx_state.worker || rx_state.refused) return rx_state.worker;
  try {
    if (rx_state.url == null) {
      rx_state.url = URL.createObjectURL(new Blob([worker_code], {type: "text/javascript"}));
    }
    rx_state.worker = new Worker(rx_state.url);
  } catch (e) {  // e.g. a page whose security policy allows no worker
    rx_state.refused = true;
    return null;
  }
  rx_state.names = null;
  rx_state.worker.onmessage = (ev) => regex_answer(ev.data);
  rx_state.worker.onerror = (ev) => {  // its script could not load or run
    ev.preventDefault();
    rx_state.refused = true;
    regex_failed(NO_WORKER);
  };
  return rx_state.worker;
}
function regex_hits(text, done, fail) {
  const w = regex_worker();
  if (w == null) { fail(NO_WORKER); return; }
  const all = name_list.data.text;
  if (rx_state.names !== all || rx_state.sent !== all.length) {  // live views add names
    w.postMessage({names: Array.from(all)});
    rx_state.names = all;
    rx_state.sent = all.length;
  }
  rx_state.job = {id: ++rx_state.id, done: done, fail: fail};
  // until it says it started: the worker's own start-up, which a busy machine may slow
  rx_state.timer = setTimeout(() => regex_failed(NO_WORKER), START_MS);
  w.postMessage({id: rx_state.id, pattern: text});
}
function regex_answer(m) {
  const job = rx_state.job;
  if (job == null || m.id !== job.id) return;  // the answer to a search since replaced
  clearTimeout(rx_state.timer);
  if (m.started) { rx_state.timer = setTimeout(() => regex_failed(TOO_SLOW), REGEX_MS); return; }
  rx_state.job = null;
  if (m.error) job.fail("pattern refused: " + m.error);
  else job.done(m.hits);
}
function end_worker() {
  clearTimeout(rx_state.timer);
  if (rx_state.worker) rx_state.worker.terminate();
  rx_state.worker = null;
}
function regex_failed(why) {
  const job = rx_state.job;
  rx_state.job = null;
  end_worker();
  if (job) job.fail(why);
}
function stop_regex() {  // a search still matching is no longer wanted: its worker may be stuck
  if (rx_state.job == null) return;
  rx_state.job = null;
  end_worker();
}

search.addEventListener("input", () => {
  stop_regex();  // the text changed: an answer still to come is for an earlier one
  count.setAttribute("aria-busy", "true");
  clearTimeout(pending);
  pending = setTimeout(run_search, 150);
});
search.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter") {
    const by = ev.shiftKey ? -1 : 1;
    if (asked !== search_key()) run_search();
    if (answered === asked) step(by); else step_wanted = by;  // a regex's answer is still to come
    ev.preventDefault();
  }
  ev.stopPropagation();  // typing here is text, not the plot's keys (or the notebook's)
});
regex_btn.addEventListener("click", () => {
  regex_on = !regex_on;
  show_mode();
  run_search();
  search.focus();
});
prev.addEventListener("click", () => step(-1));
next.addEventListener("click", () => step(1));

// -- legend ----------------------------------------------------------------------------------
const legend = el("div", "pl-tl-legend");
for (const [name, c] of meta.legend) {
  const item = el("span", "pl-tl-key");
  const swatch = el("span", "pl-tl-swatch");
  swatch.style.background = c;
  item.append(swatch, el("span", null, name));
  legend.append(item);
}
bar.append(legend);

// -- details of a clicked event ------------------------------------------------------------
const details = el("div", "pl-tl-panel pl-tl-details");
details.hidden = true;
const chosen = el("div", "pl-tl-panel pl-tl-area");
chosen.hidden = true;
after.append(details, chosen);
function closer(panel) {
  const b = el("button", "pl-tl-close", "\u00d7");
  b.title = "close (Esc)";
  b.addEventListener("click", () => { panel.hidden = true; band.hidden = true; });
  return b;
}
function rows_table(rows) {
  const t = el("table", "pl-tl-kv");
  for (const [k, v] of rows) {
    if (v == null || v === "") continue;
    const tr = el("tr");
    tr.append(el("th", null, k), el("td", null, v));
    t.append(tr);
  }
  return t;
}
function show_details(ev) {  // ev: event_details (timeline-helpers.js); null closes the panel
  details.replaceChildren();
  if (ev == null) { details.hidden = true; return; }
  details.append(closer(details), el("div", "pl-tl-title", ev.name));
  const rows = [
    ["category", ev.cat], ["start", fmt(ev.at)], ["duration", fmt(ev.dur)],
    ["end", fmt(ev.at + ev.dur)], ["lane", ev.lane], ["args", ev.detail],
    ["CPU op", ev.op],
  ];
  for (const p of ev.partners) {
    if (p.same) continue;
    const what = p.name + " on " + p.lane + " at " + fmt(p.at) + " (" + fmt(p.dur) + ")";
    rows.push([p.role === "launch (CPU)" ? "launched by" : "launched", what]);
    if (p.op) rows.push(["its CPU op", p.op]);
  }
  if (ev.gap) rows.push(["idle before", fmt(ev.gap.ms) + ", cause: " + ev.gap.cause]);
  details.append(rows_table(rows));
  details.hidden = false;
}
// what timeline-tap.js fills the panel with, and the bar other controls join
// (timeline-critical.js: the critical path's toggle, before the legend)
main.__pl_ui = {details: show_details, bar: bar, legend: legend};

// -- area selection: Shift+drag across time and lanes ----------------------------------------
const band = el("div", "pl-tl-band");
band.hidden = true;
box.append(band);
let drag = null;
function lanes_between(a, b) {  // the lanes drawn in rows a to b
  const set = new Set();
  for (let r = Math.min(a, b); r <= Math.max(a, b); r++) {
    const k = lane_of_row(r);
    if (k == null) continue;
    if (meta.headers[k]) {  // a group's header (expanded or not) stands for all of its lanes
      for (const j of members(k)) set.add(j);
    } else set.add(k);
  }
  return set;
}
const row_at = (lane) => main.__pl_rows ? main.__pl_rows.row[lane] : lane;
function place_band(x0, y0, x1, y1) {
  const b = box.getBoundingClientRect();
  band.style.left = (Math.min(x0, x1) - b.left) + "px";
  band.style.top = (Math.min(y0, y1) - b.top) + "px";
  band.style.width = Math.abs(x1 - x0) + "px";
  band.style.height = Math.max(Math.abs(y1 - y0), 4) + "px";
  band.hidden = false;
}
host.addEventListener("pointerdown", (ev) => {
  if (!ev.shiftKey || ev.button !== 0) return;
  const t = time_at(ev.clientX), lane = lane_at(ev.clientY);
  if (t == null || lane == null) return;
  ev.stopPropagation();  // bokeh's pan never sees this drag
  ev.preventDefault();
  drag = {x: ev.clientX, y: ev.clientY, t: t, row: row_at(lane)};
  place_band(ev.clientX, ev.clientY, ev.clientX, ev.clientY);
}, true);
window.addEventListener("pointermove", (ev) => {
  if (drag) place_band(drag.x, drag.y, ev.clientX, ev.clientY);
});
window.addEventListener("pointerup", (ev) => {
  if (!drag) return;
  const r = plot_rect(), f = frame();
  const sx = Math.min(Math.max(ev.clientX - r.left, f.left), f.right);
  const sy = Math.min(Math.max(ev.clientY - r.top, f.top), f.bottom);
  const t = view.frame.x_scale.invert(sx);
  const rows = main.__pl_rows ? main.__pl_rows.lane.length : nl;
  const row = Math.min(Math.max(Math.round(view.frame.y_scale.invert(sy)), 0), rows - 1);
  const a = Math.min(drag.t, t), b = Math.max(drag.t, t), lanes = lanes_between(drag.row, row);
  drag = null;
  band.hidden = true;
  if (b > a) summarise(a, b, lanes);
});
// A page that does not hold every event of the trace counts only those it holds: the longest
// of each stretch of time. Said plainly, with the knob that holds more where the page was made
// (meta.budget_hint: the CLI's --rows, or row_budget in Python).
function held_note() {
  const n = events.data.start.length;
  return "counts only the events this page holds: " + n.toLocaleString() + " of the trace's "
    + meta.total_events.toLocaleString() + ", the longest of each stretch of time, so shorter "
    + "events here are not counted; " + meta.budget_hint;
}
function summarise(a, b, lanes) {
  const E = events.data, by = new Map();
  let n = 0;
  for (let e = 0; e < E.start.length; e++) {
    const l = E.start[e], r = l + E.dur[e];
    if (r < a || l > b || !lanes.has(E.lane[e])) continue;
    const name = lt.name[E.label[e]];
    const s = by.get(name) || {count: 0, inside: 0, total: 0};
    s.count += 1; s.inside += Math.min(r, b) - Math.max(l, a); s.total += E.dur[e];
    by.set(name, s);
    n += 1;
  }
  const rows = [...by.entries()].sort((x, y) => y[1].inside - x[1].inside);
  chosen.replaceChildren(closer(chosen));
  chosen.append(el("div", "pl-tl-title", n.toLocaleString() + " events on " + lanes.size
    + (lanes.size === 1 ? " lane" : " lanes") + " from " + fmt(a) + " to " + fmt(b)
    + " (" + fmt(b - a) + ")"));
  if (!meta.complete) chosen.append(el("div", "pl-tl-note pl-tl-held", held_note()));
  const t = el("table", "pl-tl-agg"), head = el("tr");
  for (const h of ["name", "count", "time inside", "mean duration"]) head.append(el("th", null, h));
  t.append(head);
  for (const [name, s] of rows.slice(0, 200)) {
    const tr = el("tr");
    const cell = el("td", "pl-tl-name", names[name]);  // whole, wrapped (timeline.css)
    cell.title = names[name] + "\n(click: search for it)";
    cell.addEventListener("click", () => {
      // the exact name as a regex, or the name as text (it finds names that contain it)
      const exact = "^" + names[name].replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
      search.value = regex_on ? exact : names[name];
      run_search();
    });
    tr.append(cell, el("td", null, s.count.toLocaleString()), el("td", null, fmt(s.inside)),
              el("td", null, fmt(s.total / s.count)));
    t.append(tr);
  }
  if (rows.length > 200) chosen.append(el("div", "pl-tl-note", (rows.length - 200) + " more names"));
  chosen.append(t);
  chosen.hidden = false;
}
