// Turns each static chart (an SVG image) into an interactive Vega-Lite view.
// The spec sits in the page as JSON; vegaEmbed comes from the site's own bundle.
(function () {
  "use strict";
  function embed() {
    if (typeof window.vegaEmbed !== "function") return;
    document.querySelectorAll("div.vega-chart[data-spec]").forEach(function (el) {
      if (el.dataset.embedded) return;
      var source = document.getElementById(el.dataset.spec);
      if (!source) return;
      el.dataset.embedded = "1";
      var spec = JSON.parse(source.textContent);
      var options = {
        renderer: "svg",
        actions: { export: true, source: false, compiled: false, editor: false },
      };
      window.vegaEmbed(el, spec, options).catch(function () {
        el.dataset.embedded = "";
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", embed);
  } else {
    embed();
  }
})();
