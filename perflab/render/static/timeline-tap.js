// A tap on a glyph highlights its launch link: the runtime call on its CPU thread and the GPU
// work it launched, with an arrow from launch to start; the details panel (built by
// timeline-ui.js) shows the event, its link and the idle gap before it. A tap elsewhere
// clears both. Runs after timeline-helpers.js in one CustomJS.
const d = shown.data, x = cb_obj.x, y = cb_obj.y;
let hit = -1, best = Infinity;
for (let i = 0; i < d.left.length; i++) {
  const w = d.right[i] - d.left[i];
  if (x >= d.left[i] && x <= d.right[i] && Math.abs(y - d.lane_i[i]) <= 0.4 && w < best) {
    best = w; hit = i;
  }
}
const h = {left: [], right: [], bottom: [], top: [], x: [], y: [], name: [], detail: [], cat: [],
           dur: [], at: [], lane: [], lane_i: [], role: [], group: []};
const arrow = {x0: [], y0: [], x1: [], y1: []};
const partners = [];
if (hit >= 0) {
  const g = d.group[hit], found = [];
  if (g < 0) found.push([d.src[hit] ? live.data : events.data, d.ev[hit]]);
  else {
    for (const E of [events.data, live.data]) {
      for (let e = 0; e < E.group.length; e++) { if (E.group[e] === g) found.push([E, e]); }
    }
  }
  const seen = new Set(), launches = [], work = [];
  for (const [E, e] of found) {  // a partner in a collapsed group: on its header's row
    const l = E.start[e], ln = E.lane[e], y = row_of(ln), key = l + ":" + ln;
    if (seen.has(key)) continue;
    seen.add(key);
    const lab = E.label[e];
    h.left.push(l); h.right.push(l + E.dur[e]); h.bottom.push(y + 0.45); h.top.push(y - 0.45);
    h.x.push(l); h.y.push(y - 0.5); h.name.push(names[lt.name[lab]]);
    h.detail.push(describe(lab)); h.cat.push(category(lab)); h.dur.push(fmt(E.dur[e]));
    h.at.push(fmt(l)); h.lane.push(meta.lanes[ln]); h.lane_i.push(y); h.group.push(g);
    const on_gpu = meta.gpu[ln];
    const role = g < 0 ? "selected (no launch link)"
                 : on_gpu ? "launched GPU work" : "launch (CPU)";
    h.role.push(role);
    (on_gpu ? work : launches).push([l, y]);
    partners.push({role: role, name: names[lt.name[lab]], lane: meta.lanes[ln], at: l,
                   dur: E.dur[e], op: op_of(lab), same: E === (d.src[hit] ? live.data : events.data)
                   && e === d.ev[hit]});
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
if (main.__pl_ui) {
  let gap = null;
  if (hit >= 0 && !d.src[hit]) {  // the idle gap this event ended, when the page has it
    const I = idle.data;
    for (let i = 0; i < I.ev.length; i++) {
      if (I.ev[i] === d.ev[hit]) { gap = {ms: I.ms[i], cause: meta.causes[I.cause[i]]}; break; }
    }
  }
  const E = hit >= 0 && d.src[hit] ? live.data : events.data;
  main.__pl_ui.details(hit < 0 ? null : {
    name: d.name[hit], cat: d.cat[hit], detail: d.detail[hit], at: E.start[d.ev[hit]],
    dur: E.dur[d.ev[hit]], lane: d.lane[hit], lane_i: d.lane_i[hit],
    op: op_of(E.label[d.ev[hit]]), partners: partners, gap: gap,
  });
}
