// Turns each static chart (an SVG image) into an interactive Vega-Lite view.
// The spec sits in the page as JSON; vegaEmbed comes from the site's own bundle.
// On a column narrower than the chart (a phone), the chart is laid out again for the column's
// width (facets one per row, a narrower view, notes wrapped, larger type) instead of being
// scaled down, so that its labels stay readable.
(function () {
  "use strict";
  var DESIGN_WIDTH = 620;     // the width the charts are laid out for, axes and menu included
  var AXIS_ALLOWANCE = 90;    // left of the plot: the y axis, its labels and title
  var MIN_PLOT = 160;
  var FONT = 11;              // label size on a narrow column (Vega-Lite's default is 10)
  var CHAR_WIDTH = 0.6;       // average glyph width in em, to wrap titles by character count

  function wrap(lines, chars) {
    var words = [].concat(lines).join(" ").split(/\s+/).filter(Boolean);
    var out = [];
    var line = "";
    words.forEach(function (word) {
      if (line && line.length + 1 + word.length > chars) {
        out.push(line);
        line = word;
      } else {
        line = line ? line + " " + word : word;
      }
    });
    if (line) out.push(line);
    return out;
  }

  function narrow(spec, width) {
    var view = spec.facet ? spec.spec : spec;
    if (!view || typeof view.width !== "number" || width >= DESIGN_WIDTH) return spec;
    if (spec.facet) spec.columns = 1;
    view.width = Math.max(MIN_PLOT, width - AXIS_ALLOWANCE);
    var title = spec.title;
    if (title && typeof title === "object" && !Array.isArray(title)) {
      title.text = wrap(title.text, Math.floor(width / ((FONT + 2) * CHAR_WIDTH)));
      if (title.subtitle) title.subtitle = wrap(title.subtitle, Math.floor(width / (FONT * CHAR_WIDTH)));
      title.subtitleFontSize = FONT;
    }
    var config = spec.config = spec.config || {};
    function set(key, values) {
      config[key] = config[key] || {};
      Object.keys(values).forEach(function (k) { config[key][k] = values[k]; });
    }
    set("axis", { labelFontSize: FONT, titleFontSize: FONT + 1 });
    set("legend", { labelFontSize: FONT, titleFontSize: FONT + 1, labelLimit: width - 40 });
    set("header", { labelFontSize: FONT + 1, titleFontSize: FONT + 1 });
    return spec;
  }

  function draw(el) {
    var source = document.getElementById(el.dataset.spec);
    if (!source) return;
    el.dataset.embedded = "1";
    el.dataset.width = String(el.clientWidth);
    var spec = narrow(JSON.parse(source.textContent), el.clientWidth);
    var options = {
      renderer: "svg",
      actions: { export: true, source: false, compiled: false, editor: false },
    };
    window.vegaEmbed(el, spec, options).then(function (result) {
      el.vegaResult = result;
    }).catch(function () {
      el.dataset.embedded = "";
    });
  }

  function embed() {
    if (typeof window.vegaEmbed !== "function") return;
    document.querySelectorAll("div.vega-chart[data-spec]").forEach(function (el) {
      if (!el.dataset.embedded) draw(el);
    });
  }

  // A turned phone or a resized window: charts laid out for another width are drawn again.
  function redraw() {
    document.querySelectorAll("div.vega-chart[data-spec]").forEach(function (el) {
      var before = Number(el.dataset.width), now = el.clientWidth;
      var changed = Math.min(before, now) < DESIGN_WIDTH && Math.abs(before - now) > 20;
      if (!el.vegaResult || !changed) return;
      el.vegaResult.finalize();
      el.vegaResult = null;
      draw(el);
    });
  }
  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(redraw, 200);
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", embed);
  } else {
    embed();
  }
})();
