// The compile view's script (perflab.render.ptx_view). Without it the view still reads:
// colours and hover highlights come from CSS, barrier links and opcode help from titles.
// With it: a click pins a line's counterparts in every pane and scrolls them into view;
// hovering a SASS instruction outlines the instructions whose barriers it waits on (solid)
// and those that wait on it (dashed).
window.perflabPtxView = window.perflabPtxView || function (id) {
  var root = document.getElementById(id);
  if (!root) return;
  root.addEventListener("click", function (e) {
    var t = e.target.closest("[data-l],[data-p]");
    root.querySelectorAll(".pin,.pinp").forEach(function (x) { x.classList.remove("pin", "pinp"); });
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
};
