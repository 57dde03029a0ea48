// A job's collectives linked across ranks: for the visible range, the instances are binned
// (a few pixels a bin) and each bin draws its most skewed one: a line through every rank's
// kernel start, top to bottom, and a marker where the last rank arrived. The line is red when
// the job's straggler arrived last. Runs as the body of a bokeh CustomJS with args inst
// (per instance: first, last, skew, op), cells (per instance and rank column: off, lane),
// links, late, xr, main and cmeta.
const I = inst.data, C = cells.data, R = cmeta.ranks.length;
const v0 = xr.start, v1 = xr.end, vw = Math.max(v1 - v0, 1e-12);
const width = Math.max(main.inner_width || 0, 100);
const bins = Math.max(1, Math.floor(width / cmeta.px_per_link));
const first = I.first, n = first.length;
function lower(x) {  // first instance starting at or after x
  let lo = 0, hi = n;
  while (lo < hi) { const m = (lo + hi) >> 1; if (first[m] < x) lo = m + 1; else hi = m; }
  return lo;
}
// lanes to rows as the lanes' figure lays them out now (see timeline-helpers.js): a line
// leaves out the ranks in a collapsed group; its last arrival marks the group's header row
const rows_now = main.__pl_rows || null;
const row_of = (ln) => rows_now ? rows_now.row[ln] : ln;
const hidden = (ln) => rows_now ? rows_now.hidden[ln] === 1 : false;
const best = new Int32Array(bins).fill(-1);
for (let i = lower(v0 - cmeta.max_skew); i < n && first[i] <= v1; i++) {
  const b = Math.min(bins - 1, Math.max(0, Math.floor((first[i] - v0) / vw * bins)));
  if (best[b] < 0 || I.skew[i] > I.skew[best[b]]) best[b] = i;
}
function fmt(ms) {
  const ns = ms * 1e6, units = [[1e9, " s"], [1e6, " ms"], [1e3, " us"], [1, " ns"]];
  for (const [s, u] of units) { if (Math.abs(ns) >= s) return (ns / s).toPrecision(3) + u; }
  return ns.toPrecision(3) + " ns";
}
const L = {xs: [], ys: [], color: [], op: [], skew: [], last: [], number: []};
const M = {x: [], y: [], color: [], op: [], skew: [], last: [], number: []};
for (let b = 0; b < bins; b++) {
  const i = best[b];
  if (i < 0) continue;
  const pts = [];
  for (let r = 0; r < R; r++) {
    const lane = C.lane[i * R + r], off = C.off[i * R + r];
    if (lane >= 0 && !Number.isNaN(off) && !hidden(lane)) pts.push([row_of(lane), first[i] + off]);
  }
  if (pts.length < 2) continue;
  pts.sort((a, c) => a[0] - c[0]);
  const last = I.last[i], color = cmeta.ranks[last] === cmeta.straggler ? "#d62728" : "#4a5a70";
  const op = cmeta.ops[I.op[i]] || "?", skew = fmt(I.skew[i]), who = "rank " + cmeta.ranks[last];
  L.xs.push(pts.map((p) => p[1])); L.ys.push(pts.map((p) => p[0]));
  L.color.push(color); L.op.push(op); L.skew.push(skew); L.last.push(who); L.number.push(i + 1);
  const lane = C.lane[i * R + last];
  M.x.push(first[i] + C.off[i * R + last]); M.y.push(row_of(lane));
  M.color.push(color); M.op.push(op); M.skew.push(skew); M.last.push(who); M.number.push(i + 1);
}
links.setv({data: L}, {sync: false});
late.setv({data: M}, {sync: false});
