// A tap on a glyph highlights its launch link: the runtime call on its CPU thread and the GPU
// work it launched, with an arrow from launch to start. A tap elsewhere clears it.
// Runs after timeline-helpers.js in one CustomJS.
const d = shown.data, x = cb_obj.x, y = cb_obj.y;
let hit = -1, best = Infinity;
for (let i = 0; i < d.left.length; i++) {
  const w = d.right[i] - d.left[i];
  if (x >= d.left[i] && x <= d.right[i] && Math.abs(y - d.lane_i[i]) <= 0.4 && w < best) {
    best = w; hit = i;
  }
}
const h = {left: [], right: [], bottom: [], top: [], x: [], y: [], name: [], detail: [], dur: [],
           at: [], lane: [], lane_i: [], role: [], group: []};
const arrow = {x0: [], y0: [], x1: [], y1: []};
if (hit >= 0) {
  const g = d.group[hit], found = [];
  if (g < 0) found.push([d.src[hit] ? live.data : events.data, d.ev[hit]]);
  else {
    for (const E of [events.data, live.data]) {
      for (let e = 0; e < E.group.length; e++) { if (E.group[e] === g) found.push([E, e]); }
    }
  }
  const seen = new Set(), launches = [], work = [];
  for (const [E, e] of found) {
    const l = E.start[e], ln = E.lane[e], key = l + ":" + ln;
    if (seen.has(key)) continue;
    seen.add(key);
    const lab = E.label[e];
    h.left.push(l); h.right.push(l + E.dur[e]); h.bottom.push(ln + 0.45); h.top.push(ln - 0.45);
    h.x.push(l); h.y.push(ln - 0.5); h.name.push(names[lt.name[lab]]);
    h.detail.push(describe(lab)); h.dur.push(fmt(E.dur[e])); h.at.push(fmt(l));
    h.lane.push(meta.lanes[ln]); h.lane_i.push(ln); h.group.push(g);
    const on_gpu = meta.gpu[ln];
    h.role.push(g < 0 ? "selected (no launch link)"
                : on_gpu ? "launched GPU work" : "launch (CPU)");
    (on_gpu ? work : launches).push([l, ln]);
  }
  for (const [lx, ly] of launches) {
    for (const [wx, wy] of work) {
      arrow.x0.push(lx); arrow.y0.push(ly); arrow.x1.push(wx); arrow.y1.push(wy);
    }
  }
}
links.setv({data: h}, {sync: false});
arrows.setv({data: arrow}, {sync: false});
mark_selected(d);
