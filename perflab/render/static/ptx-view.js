// The compile view's script (perflab.render.ptx_view). Without it the view still reads:
// colours and hover highlights come from CSS, barrier links and opcode help from titles,
// and panes too narrow to sit side by side wrap onto a row of their own.
// With it: a click pins a line's counterparts in every pane and scrolls them into view,
// and a click on a SASS instruction opens a details row with its control bits decoded;
// hovering a SASS instruction outlines the instructions whose barriers it waits on (solid)
// and those that wait on it (dashed); a toggle lays the panes out side by side or stacked,
// and handles between panes resize them.
window.perflabPtxView = window.perflabPtxView || function (id) {
  var root = document.getElementById(id);
  if (!root) return;
  var MIN_PANE = 120; // px: narrower, a pane shows too little to be worth keeping

  // A SASS instruction's control bits and live registers in words, under its row.
  var detail = null;
  function toggleDetail(row) {
    var shown = detail && detail.previousSibling === row;
    if (detail) detail.remove();
    detail = null;
    if (shown) return;
    var ctl = row.querySelector(".ctl"), lr = row.querySelector(".lr");
    if (!ctl) return;
    var live = lr ? (lr.title || lr.textContent.trim() + " general registers live") : "";
    detail = document.createElement("div");
    detail.className = "pv-detail";
    detail.textContent = ctl.title + (live ? "\n" + live : "");
    row.after(detail);
  }

  root.addEventListener("click", function (e) {
    if (e.target.closest(".pv-grip, .pv-layout, .pv-detail")) return;
    var t = e.target.closest("[data-l],[data-p]");
    root.querySelectorAll(".pin,.pinp").forEach(function (x) { x.classList.remove("pin", "pinp"); });
    var ins = e.target.closest("[data-o]");
    if (ins) toggleDetail(ins);
    else if (detail) { detail.remove(); detail = null; }
    if (!t) return;
    var l = t.getAttribute("data-l"), p = t.getAttribute("data-p");
    function mark(sel, cls) {
      root.querySelectorAll(sel).forEach(function (x) {
        x.classList.add(cls);
        if (x !== t && !x.parentNode.dataset.done) {
          x.parentNode.dataset.done = 1;
          x.parentNode.scrollTop = x.offsetTop - x.parentNode.offsetTop - 40;
        }
      });
    }
    if (l) mark('[data-l="' + l + '"]', "pin");
    if (p) mark('[data-p="' + p + '"]', "pinp");
    root.querySelectorAll("[data-done]").forEach(function (x) { delete x.dataset.done; });
  });

  var linked = [];
  function clear() {
    linked.forEach(function (x) { x.classList.remove("pv-setter", "pv-waiter", "pv-self"); });
    linked = [];
  }
  function outline(pane, offsets, cls) {
    (offsets || "").split(" ").forEach(function (o) {
      if (!o) return;
      var row = pane.querySelector('[data-o="' + o + '"]');
      if (row) { row.classList.add(cls); linked.push(row); }
    });
  }
  root.addEventListener("mouseover", function (e) {
    var row = e.target.closest("[data-o]");
    clear();
    if (!row || !(row.hasAttribute("data-w") || row.hasAttribute("data-b"))) return;
    var pane = row.parentNode;
    row.classList.add("pv-self"); linked.push(row);
    outline(pane, row.getAttribute("data-w"), "pv-setter");
    outline(pane, row.getAttribute("data-b"), "pv-waiter");
  });
  root.addEventListener("mouseleave", clear);

  var panes = root.querySelector(".pv-panes");
  if (!panes) return;
  var list = Array.prototype.slice.call(panes.children).filter(function (x) {
    return x.classList.contains("pv-pane");
  });

  // The layout toggle: auto (wrap what does not fit), side by side, stacked.
  var MODES = [["auto", "auto"], ["side", "side by side"], ["stacked", "stacked"]];
  var toggle = document.createElement("span");
  toggle.className = "pv-layout";
  toggle.textContent = "panes:";
  MODES.forEach(function (m) {
    var b = document.createElement("button");
    b.type = "button";
    b.dataset.mode = m[0];
    b.textContent = m[1];
    toggle.appendChild(b);
  });
  function layout(mode) {
    panes.classList.toggle("pv-side", mode === "side");
    panes.classList.toggle("pv-stacked", mode === "stacked");
    toggle.querySelectorAll("button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset.mode === mode));
    });
    list.forEach(function (x) { x.style.removeProperty("flex"); }); // sizes from a drag
  }
  toggle.addEventListener("click", function (e) {
    var b = e.target.closest("button");
    if (b) layout(b.dataset.mode);
  });
  var bar = root.querySelector(".pv-filters");
  (bar || panes.parentNode).insertBefore(toggle, bar ? bar.firstChild : panes);
  layout("auto");

  // Handles on the right edge of each pane but the last: a drag moves the border between
  // it and the next pane when they share a row, else widens or narrows the pane alone.
  function size(pane, width) {
    pane.style.setProperty("flex", "0 1 " + Math.round(width) + "px", "important");
  }
  function grab(left, right, grip) {
    return function (e) {
      e.preventDefault();
      var x0 = e.clientX;
      var a = left.getBoundingClientRect(), b = right.getBoundingClientRect();
      var shared = Math.abs(a.top - b.top) < 2;
      var total = a.width + b.width;
      grip.classList.add("pv-dragging");
      function move(ev) {
        var w = Math.max(MIN_PANE, a.width + ev.clientX - x0);
        if (shared) w = Math.min(w, total - MIN_PANE);
        size(left, w);
        if (shared) size(right, total - w);
      }
      function stop() {
        grip.classList.remove("pv-dragging");
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", stop);
      }
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", stop);
    };
  }
  list.slice(0, -1).forEach(function (pane, i) {
    var grip = document.createElement("div");
    grip.className = "pv-grip";
    grip.title = "drag to resize the panes";
    grip.addEventListener("pointerdown", grab(pane, list[i + 1], grip));
    pane.appendChild(grip);
  });
};
