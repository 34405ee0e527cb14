// Render every <div class="chart" data-chart-url="..."> with the Plotly figure JSON its URL returns,
// on page load and after each htmx swap. The server builds the figure (dashboards/charts.py).
// plotly.js (1.3 MB) is loaded from here, only on pages with a chart, as an async script: the page
// paints without waiting for it, and the figures are fetched while it downloads.
(function () {
  var plotlySrc = document.currentScript.dataset.plotlySrc;
  var plotly = null;

  function loadPlotly() {
    if (!plotly) {
      plotly = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = plotlySrc;
        script.onload = function () { resolve(window.Plotly); };
        script.onerror = function () { reject(new Error("plotly.js could not be loaded from " + plotlySrc)); };
        document.head.appendChild(script);
      });
    }
    return plotly;
  }
  function fetchFigure(url) {
    return fetch(url, {credentials: "same-origin"}).then(function (response) {
      if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
      return response.json();
    });
  }
  function render(el) {
    Promise.all([loadPlotly(), fetchFigure(el.dataset.chartUrl)])
      .then(function (loaded) {
        var figure = loaded[1];
        return loaded[0].react(el, figure.data, figure.layout, {responsive: true, displaylogo: false});
      })
      .then(function () { el.dataset.rendered = "true"; })
      .catch(function (error) {
        el.dataset.rendered = "error";
        el.textContent = "Chart could not be loaded: " + error.message;
      });
  }
  function renderAll(root) {
    root.querySelectorAll(".chart[data-chart-url]").forEach(render);
  }
  function keepFresh(el) {
    var seconds = Number(el.dataset.refreshSeconds);
    if (seconds > 0) {
      setInterval(function () { if (document.visibilityState === "visible") { render(el); } }, seconds * 1000);
    }
  }
  function start() {
    renderAll(document);
    document.querySelectorAll(".chart[data-refresh-seconds]").forEach(keepFresh);
  }
  // A deferred script runs once the document is parsed; this also covers it being loaded otherwise.
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  document.addEventListener("htmx:afterSwap", function (event) { renderAll(event.target); });
})();
