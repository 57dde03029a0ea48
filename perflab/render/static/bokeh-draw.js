// Draws a chart output's bokeh plot once BokehJS is in the page, then hides the output's
// static picture. Runs in the output's own script (so currentScript is that script), with
// bokeh's embedding code in place of the CODE comment below. A page still loading may reach
// a later output before the one that carries BokehJS: it waits a while for it, and if
// BokehJS never comes (that output was cleared), the static picture stays.
(function () {
  var box = document.currentScript && document.currentScript.parentNode;
  function draw(embed) {
    var tries = 0;
    function go() {
      if (typeof window.Bokeh === "undefined") {
        if (++tries < 300) setTimeout(go, 100);
        return;
      }
      embed();
      var picture = box && box.querySelector(".perflab-static");
      if (picture) picture.style.display = "none";
    }
    go();
  }
  draw(function () {
/* CODE */
  });
})();
