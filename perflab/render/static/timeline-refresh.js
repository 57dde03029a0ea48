// Redraw for the visible range: the finest pre-computed level that fits it, or the level a
// live kernel sent for this range. Changes stay in the page (sync: false): a live kernel is
// never sent what it can compute itself. Runs after timeline-helpers.js in one CustomJS.
const span = meta.span, v0 = xr.start, v1 = xr.end, vw = Math.max(v1 - v0, 1e-12);
// one pixel in ms: every drawn event is at least this wide, so a short one still shows
const px = vw / Math.max(main.inner_width || 0, 100);
const lv = levels.data, ll = live_level.data;
let L = 0;
for (let i = 0; i < lv.tiles.length; i++) { if (span / lv.tiles[i] >= vw / 2) L = i; }
const use_live = ll.t0.length > 0 && ll.t0[0] <= v0 && ll.t1[0] >= v1
  && ll.t1[0] - ll.t0[0] <= 4 * vw;
const d = {left: [], right: [], bottom: [], top: [], name: [], detail: [], cat: [], color: [],
           dur: [], at: [], lane: [], lane_i: [], ev: [], src: [], group: []};
function emit(E, e, src) {
  const l = E.start[e], rr = l + E.dur[e];
  const ln = E.lane[e];
  if (rr < v0 || l > v1 || hidden(ln)) return;
  const lab = E.label[e], y = row_of(ln);
  d.left.push(l); d.right.push(Math.max(rr, l + px));
  d.bottom.push(y + 0.38); d.top.push(y - 0.38);
  d.name.push(names[lt.name[lab]]); d.detail.push(describe(lab));
  d.cat.push(category(lab)); d.color.push(color(lab));
  d.dur.push(fmt(E.dur[e])); d.at.push(fmt(l)); d.lane.push(meta.lanes[ln]); d.lane_i.push(y);
  d.ev.push(e); d.src.push(src); d.group.push(E.group[e]);
}
// Busy time as outlines: the cover behind each lane and the strip above them are one
// polygon each (one glyph, not one per bin), a step per bin along a baseline. In the lanes any
// work in a bin shows at least 2 px wide and a quarter high: a lane of short events never
// looks empty.
function outline(y0) { return {xs: [], ys: [], y0: y0, end: -Infinity}; }
function step_to(o, left, right, top) {
  left = Math.max(left, o.end);
  if (right <= left) return;  // within the step before's minimum width
  if (left > o.end) {  // after a gap: down to the baseline, along it, up again
    if (o.xs.length) { o.xs.push(o.end); o.ys.push(o.y0); }
    o.xs.push(left); o.ys.push(o.y0);
  }
  o.xs.push(left, right); o.ys.push(top, top); o.end = right;
}
function closed(outlines) {
  const xs = [], ys = [];
  for (const o of outlines) {
    if (o.xs.length) { xs.push([...o.xs, o.end]); ys.push([...o.ys, o.y0]); }
  }
  return {xs: xs, ys: ys};
}
const nl = meta.lanes.length, lanes_busy = [], strip = [outline(0)];
for (let k = 0; k < nl; k++) lanes_busy.push(outline(row_of(k) + 0.4));
function draw_busy(cells, base, B, T0, T1) {
  const bw = (T1 - T0) / B;
  const i0 = Math.max(0, Math.floor((v0 - T0) / bw));
  const i1 = Math.min(B - 1, Math.floor((v1 - T0) / bw));
  const step = Math.max(1, Math.ceil((i1 - i0 + 1) / meta.max_bins));
  for (let i = i0; i <= i1; i += step) {
    const hi = Math.min(i + step, i1 + 1);
    for (let k = 0; k <= nl; k++) {
      let m = 0;
      for (let j = i; j < hi; j++) m += cells[base + k * B + j];
      m /= 255 * (hi - i);
      if (m <= 0 || (k < nl && hidden(k))) continue;
      const x0 = T0 + i * bw, x1 = T0 + hi * bw;
      if (k === nl) step_to(strip[0], x0, x1, m);
      else step_to(lanes_busy[k], x0, Math.max(x1, x0 + 2 * px), lanes_busy[k].y0 - 0.8 * Math.max(m, 0.25));
    }
  }
}
let level;
if (use_live) {
  const E = live.data, n = Math.min(ll.n[0], E.start.length);
  for (let e = 0; e < n; e++) emit(E, e, 1);
  draw_busy(live_busy.data.cells, 0, ll.bins[0], ll.t0[0], ll.t1[0]);
  level = "live";
} else {
  const E = events.data, R = rows.data.rows, offs = tiles.data.offsets;
  const w = span / lv.tiles[L], base = lv.tile_base[L], seen = new Set();
  const a = Math.max(0, Math.floor(v0 / w)), b = Math.min(lv.tiles[L] - 1, Math.floor(v1 / w));
  for (let t = a; t <= b; t++) {
    for (let r = offs[base + t]; r < offs[base + t + 1]; r++) {
      const e = R[r];
      if (!seen.has(e)) { seen.add(e); emit(E, e, 0); }
    }
  }
  draw_busy(busy.data.cells, lv.busy_base[L], lv.bins[L], 0, span);
  level = "detail level " + L;
}
// Search matches (labels in query.label): every event of the page in view, not only those
// this level draws, at least a pixel wide and one per lane and pixel; the current one (query
// .current: [src, event]) in black. So the highlight holds at every zoom.
const F = {left: [], right: [], bottom: [], top: [], color: []}, q = query.data;
function mark_found(E, e, c) {
  const l = E.start[e], ln = E.lane[e], y = row_of(ln);
  if (hidden(ln)) return;  // in a collapsed group
  F.left.push(l); F.right.push(Math.max(l + E.dur[e], l + px));
  F.bottom.push(y + 0.46); F.top.push(y - 0.46); F.color.push(c);
}
if (q.label && q.label.length) {
  const want = new Set(q.label), taken = new Set();
  const scan = (E, n) => {
    for (let e = 0; e < n; e++) {
      if (!want.has(E.label[e])) continue;
      const l = E.start[e];
      if (l + E.dur[e] < v0 || l > v1) continue;
      const key = E.lane[e] + ":" + Math.floor((l - v0) / px);
      if (!taken.has(key)) { taken.add(key); mark_found(E, e, "#ff9900"); }
    }
  };
  scan(events.data, events.data.start.length);
  if (use_live) scan(live.data, Math.min(ll.n[0], live.data.start.length));
  if (q.current && q.current.length === 2) {
    mark_found(q.current[0] ? live.data : events.data, q.current[1], "#111111");
  }
}
found.setv({data: F}, {sync: false});
shown.setv({data: d}, {sync: false});
mark_selected(d);
cover.setv({data: closed(lanes_busy)}, {sync: false});
summary.setv({data: closed(strip)}, {sync: false});
main.title.setv({text: meta.title + "  [" + level + ": " + d.left.length + " events drawn]"},
                {sync: false});
