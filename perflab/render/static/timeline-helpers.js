// Helpers shared by the timeline page scripts: hover text from the label table.
// Run as the body of a bokeh CustomJS; its args (labels, name_list, meta, shown, links,
// main) are in scope.
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
// The row each lane is drawn in: timeline-ui.js sets main.__pl_rows when a group is
// collapsed or expanded ({row, hidden, lane}: a hidden lane's row is its header's, lane lists
// the lane of each row); until then every lane is its own row.
const rows_now = main.__pl_rows || null;
function row_of(ln) { return rows_now ? rows_now.row[ln] : ln; }
function hidden(ln) { return rows_now ? rows_now.hidden[ln] === 1 : false; }
