// The critical path of each step, behind a toggle in the bar above the plot: on, the
// stretches in view are drawn over their lanes (work filled, waiting for peers, for a launch
// or for nothing recorded hatched; hover says the kind and the time on the path) and the other
// events dimmed; off, the page is as it was. The stretches come on their own (crit, cmeta),
// not from the levels of detail, so the path shows whatever events the page holds. Where the
// path cannot be shown, the toggle is disabled and its title says why. Runs after
// timeline-helpers.js as a bokeh CustomJS on each layout and range change, after timeline-ui.js.
const ui = main.__pl_ui;
if (ui == null) return;  // the controls are not built yet
let state = main.__pl_crit;
if (state == null) {
  state = main.__pl_crit = {on: false};
  const label = document.createElement("label");
  label.className = "pl-tl-crit";
  const box = document.createElement("input");
  box.type = "checkbox";
  const hint = document.createElement("span");
  hint.className = "pl-tl-crit-hint";
  label.append(box, document.createTextNode(" critical path"), hint);
  if (cmeta.reason) {
    box.disabled = true;
    label.classList.add("pl-tl-disabled");
    label.title = cmeta.reason;
  } else {
    const n = cmeta.steps.length;
    label.title = "highlight the critical path of " + (n === 1 ? "the step" : "each of the " + n
      + " steps") + ": what set the step's duration (work filled, waiting hatched)";
    if (!cmeta.complete) {
      label.title += "; the page holds the longest " + cmeta.held.toLocaleString() + " runs of its "
        + cmeta.total.toLocaleString() + " stretches";
    }
  }
  box.setAttribute("aria-label", "critical path: " + label.title);
  box.addEventListener("change", () => {
    state.on = box.checked;
    hint.textContent = box.checked ? " (hatched: waiting)" : "";
    state.draw();
  });
  ui.bar.insertBefore(label, ui.legend);
  state.box = box;
}
const EMPTY = {left: [], right: [], bottom: [], top: [], fill: [], alpha: [], hatch: [], line: [],
               edge: [], name: [], kind: [], on_path: [], step: [], at: [], lane: []};
state.draw = function () {
  if (!state.on) {
    crit_shown.setv({data: EMPTY}, {sync: false});
    bars.glyph.setv({fill_alpha: 1, line_alpha: 1}, {sync: false});
    return;
  }
  bars.glyph.setv({fill_alpha: 0.18, line_alpha: 0.18}, {sync: false});
  const C = crit.data, v0 = xr.start, v1 = xr.end;
  const px = Math.max(v1 - v0, 1e-12) / Math.max(main.inner_width || 0, 100);
  const out = {}, taken = new Set();
  for (const k in EMPTY) out[k] = [];
  for (let e = 0; e < C.start.length; e++) {
    const l = C.start[e], r = l + C.dur[e], ln = C.lane[e];
    if (r < v0 || l > v1 || ln < 0) continue;
    const y = row_of(ln), key = y + ":" + Math.floor((l - v0) / px);
    if (C.dur[e] < px && taken.has(key)) continue;  // one stretch a pixel: it is drawn wider
    taken.add(key);
    const wait = C.wait[e] === 1, s = C.step[e];
    out.left.push(l); out.right.push(Math.max(r, l + px));
    out.bottom.push(y + 0.47); out.top.push(y - 0.47);
    // work: yellow under a dark outline (no event colour is yellow); waiting: red hatching
    out.fill.push(wait ? "#ffffff" : "#ffe14d"); out.alpha.push(wait ? 0.6 : 0.85);
    out.hatch.push(wait ? "/" : " "); out.line.push(wait ? "#c62828" : "#3d3000");
    out.edge.push(C.dur[e] >= 4 * px ? 1 : 0);  // no outline on a sliver: it would be all edge
    out.name.push(cmeta.names[C.name[e]] || "?"); out.kind.push(cmeta.kinds[C.kind[e]] || "?");
    out.on_path.push(fmt(C.dur[e]));
    const share = cmeta.step_ms[s] > 0 ? (100 * C.dur[e] / cmeta.step_ms[s]).toFixed(1) : "0";
    out.step.push(cmeta.steps[s] + ": " + share + "% of " + fmt(cmeta.step_ms[s]));
    out.at.push(fmt(l)); out.lane.push(meta.lanes[ln]);
  }
  crit_shown.setv({data: out}, {sync: false});
};
state.draw();
