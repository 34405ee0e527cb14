// Render every <div class="chart" data-chart-url="..."> with the Plotly figure JSON its URL returns,
// on page load and after each htmx swap. The server builds the figure (dashboards/charts.py).
(function () {
  function render(el) {
    fetch(el.dataset.chartUrl, {credentials: "same-origin"})
      .then(function (response) {
        if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
        return response.json();
      })
      .then(function (figure) {
        return Plotly.react(el, figure.data, figure.layout, {responsive: true, displaylogo: false});
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
  document.addEventListener("DOMContentLoaded", function () {
    renderAll(document);
    document.querySelectorAll(".chart[data-refresh-seconds]").forEach(keepFresh);
  });
  document.addEventListener("htmx:afterSwap", function (event) { renderAll(event.target); });
})();
