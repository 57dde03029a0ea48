// Helpers shared by the timeline page scripts: hover text from the label table, and what the
// details panel says of an event. Run as the body of a bokeh CustomJS; its args (labels,
// name_list, meta, shown, links, main; events, live and idle where the script has them) are
// in scope.
const lt = labels.data, names = name_list.data.text;
function fmt(ms) {
  const ns = ms * 1e6, units = [[1e9, " s"], [1e6, " ms"], [1e3, " us"], [1, " ns"]];
  for (const [s, u] of units) { if (Math.abs(ns) >= s) return (ns / s).toPrecision(3) + u; }
  return ns.toPrecision(3) + " ns";
}
function bytes(n) {
  const u = [[1099511627776, " TiB"], [1073741824, " GiB"], [1048576, " MiB"], [1024, " KiB"]];
  for (const [s, x] of u) { if (n >= s) return (n / s).toPrecision(3) + x; }
  return n + " B";
}
function describe(lab) {
  const parts = [meta.kinds[lt.kind[lab]] || "other"];
  const dims = (p) => "(" + [lt[p + "x"][lab], lt[p + "y"][lab], lt[p + "z"][lab]].join(", ") + ")";
  if (lt.grid_x[lab] >= 0) parts.push("grid " + dims("grid_"));
  if (lt.block_x[lab] >= 0) parts.push("block " + dims("block_"));
  if (lt.registers[lab] >= 0) parts.push(lt.registers[lab] + " registers/thread");
  if (lt.shared_mem[lab] > 0) parts.push(bytes(lt.shared_mem[lab]) + " shared/block");
  if (lt.direction[lab] >= 0) parts.push(meta.directions[lt.direction[lab]] || "?");
  if (lt.bytes[lab] >= 0) parts.push(bytes(lt.bytes[lab]));
  return parts.join(", ");
}
function category(lab) { return meta.classes[lt.cls[lab]] || meta.kinds[lt.kind[lab]] || "other"; }
function color(lab) { return meta.colors[lt.cls[lab]] || "#bab0ac"; }
function op_of(lab) { return lt.op[lab] >= 0 ? names[lt.op[lab]] : null; }
function mark_selected(d) {
  // glyphs of the highlighted link stay selected whatever the zoom
  const hl = links.data, keys = new Set(hl.x.map((x, i) => x + ":" + hl.lane_i[i])), sel = [];
  for (let i = 0; i < d.left.length; i++) {
    if (keys.has(d.left[i] + ":" + d.lane_i[i])) sel.push(i);
  }
  shown.selected.setv({indices: sel}, {sync: false});
}
// The events of event e's launch link (the runtime call on its CPU thread and the GPU work it
// launched), among the page's events and a live kernel's, each once: [E, e] pairs (E:
// events.data or live.data); the event alone when it has no link.
function link_of(E, e) {
  const g = E.group[e];
  if (g < 0) return [[E, e]];
  const out = [], seen = new Set();
  for (const F of [events.data, live.data]) {
    for (let f = 0; f < F.group.length; f++) {
      if (F.group[f] !== g) continue;
      const key = F.start[f] + ":" + F.lane[f];
      if (!seen.has(key)) { seen.add(key); out.push([F, f]); }
    }
  }
  return out;
}
// The idle gap before the GPU work that event e of the page's events ended, when the page
// holds it (the idle source); null otherwise.
function gap_before(E, e) {
  if (typeof idle === "undefined" || E !== events.data) return null;
  const I = idle.data;
  for (let i = 0; i < I.ev.length; i++) {
    if (I.ev[i] === e) return {ms: I.ms[i], cause: meta.causes[I.cause[i]]};
  }
  return null;
}
// What the details panel shows of event e of E: name, category, times, lane, launch details,
// CPU op, the events of its launch link (partners, with E and e of each, for highlighting)
// and the idle gap it ended.
function event_details(E, e) {
  const lab = E.label[e], g = E.group[e], partners = [];
  for (const [F, f] of link_of(E, e)) {
    const lb = F.label[f], on_gpu = meta.gpu[F.lane[f]];
    partners.push({
      role: g < 0 ? "selected (no launch link)" : on_gpu ? "launched GPU work" : "launch (CPU)",
      name: names[lt.name[lb]], lane: meta.lanes[F.lane[f]], at: F.start[f], dur: F.dur[f],
      op: op_of(lb), same: F === E && f === e, E: F, e: f,
    });
  }
  return {
    name: names[lt.name[lab]], cat: category(lab), detail: describe(lab), at: E.start[e],
    dur: E.dur[e], lane: meta.lanes[E.lane[e]], op: op_of(lab), partners: partners,
    gap: gap_before(E, e),
  };
}
// Highlights the launch link of the event ``info`` describes (event_details; null clears it):
// its events outlined on their rows (a collapsed group's on its header's), an arrow from each
// launch to the work it launched. The script calling it has links and arrows among its args.
function show_link(info) {
  const h = {left: [], right: [], bottom: [], top: [], x: [], y: [], name: [], detail: [],
             cat: [], dur: [], at: [], lane: [], lane_i: [], role: [], group: []};
  const arrow = {x0: [], y0: [], x1: [], y1: []}, launches = [], work = [];
  for (const p of info ? info.partners : []) {
    const E = p.E, e = p.e, l = E.start[e], y = row_of(E.lane[e]), lab = E.label[e];
    h.left.push(l); h.right.push(l + E.dur[e]); h.bottom.push(y + 0.45); h.top.push(y - 0.45);
    h.x.push(l); h.y.push(y - 0.5); h.name.push(p.name);
    h.detail.push(describe(lab)); h.cat.push(category(lab)); h.dur.push(fmt(E.dur[e]));
    h.at.push(fmt(l)); h.lane.push(p.lane); h.lane_i.push(y); h.group.push(E.group[e]);
    h.role.push(p.role);
    (meta.gpu[E.lane[e]] ? work : launches).push([l, y]);
  }
  for (const [lx, ly] of launches) {
    for (const [wx, wy] of work) {
      arrow.x0.push(lx); arrow.y0.push(ly); arrow.x1.push(wx); arrow.y1.push(wy);
    }
  }
  links.setv({data: h}, {sync: false});
  arrows.setv({data: arrow}, {sync: false});
  mark_selected(shown.data);
}
// The row each lane is drawn in: timeline-ui.js sets main.__pl_rows when a group is
// collapsed or expanded ({row, hidden, lane}: a hidden lane's row is its header's, lane lists
// the lane of each row); until then every lane is its own row. Read at each call: the ui
// script's functions outlive a collapse or an expansion.
function row_of(ln) { const r = main.__pl_rows; return r ? r.row[ln] : ln; }
function hidden(ln) { const r = main.__pl_rows; return r ? r.hidden[ln] === 1 : false; }
