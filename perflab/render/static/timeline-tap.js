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
const info = hit < 0 ? null : event_details(d.src[hit] ? live.data : events.data, d.ev[hit]);
show_link(info);
if (main.__pl_ui) main.__pl_ui.details(info);
