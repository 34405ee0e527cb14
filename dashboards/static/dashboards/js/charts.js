// Render every <div class="chart" data-chart-url="..."> with the Plotly figure JSON its URL returns,
// once it comes within NEAR_SCREEN of the screen, on page load and after each htmx swap: a first
// visit fetches and draws what is on screen, not the dozen charts further down, and the rest as the
// reader scrolls to them; the charts in view are drawn (and painted) before those only near it. The server builds the figure (dashboards/charts.py).
// Charts with a data-chart-part share one answer holding a figure per part (the Runtime section):
// one request draws them all, a zoom of one zooms the others, and a click on a point opens
// layout.meta.link with the point's batch id (or the address a mark carries).
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
        // The mark tells a bench (bench/page_load.py) when plotly.js had run, not only arrived.
        script.onload = function () { performance.mark("ckptweb:plotly-ready"); resolve(window.Plotly); };
        script.onerror = function () { reject(new Error("plotly.js could not be loaded from " + plotlySrc)); };
        document.head.appendChild(script);
      });
    }
    return plotly;
  }
  // url -> its answer, kept so that the parts of one answer drawn as they are scrolled to share one
  // request; forgotten when the charts are asked to show newer figures (a refresh, an htmx swap).
  var answers = {};
  function fetchFigure(url) {
    if (!answers[url]) {
      answers[url] = fetch(url, {credentials: "same-origin"}).then(function (response) {
        if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
        return response.json();
      });
      answers[url].catch(function () { delete answers[url]; });
    }
    return answers[url];
  }
  function forgetAnswers(root) {
    charts(root).forEach(function (el) { delete answers[el.dataset.chartUrl]; });
  }
  function render(el) {
    return Promise.all([loadPlotly(), fetchFigure(el.dataset.chartUrl)])
      .then(function (loaded) {
        var part = el.dataset.chartPart;
        var figure = part ? loaded[1][part] : loaded[1];
        if (!figure) { throw new Error("the answer has no " + part + " chart"); }
        return loaded[0].react(el, figure.data, figure.layout, {responsive: true, displaylogo: false});
      })
      .then(function () { follow(el); el.dataset.rendered = "true"; })
      .catch(function (error) {
        el.dataset.rendered = "error";
        el.textContent = "Chart could not be loaded: " + error.message;
      });
  }
  function follow(el) {
    if (el.dataset.followed) { return; }
    el.dataset.followed = "true";
    el.on("plotly_click", function (event) { openLink(el, event.points); });
    if (el.dataset.chartPart) { el.on("plotly_relayout", function (change) { zoomSiblings(el, change); }); }
  }
  function openLink(el, points) {
    var point = points.find(function (p) { return p.customdata !== undefined && p.customdata !== null; });
    var link = el.layout.meta && el.layout.meta.link;
    if (!point) { return; }
    if (typeof point.customdata === "string") { window.location.href = point.customdata; }
    else if (link) { window.location.href = link.replace("{}", point.customdata); }
  }
  function zoomSiblings(el, change) {
    if (el.dataset.zooming) { return; }
    var update = {};
    Object.keys(change).forEach(function (key) { if (key.indexOf("xaxis.") === 0) { update[key] = change[key]; } });
    if (!Object.keys(update).length) { return; }
    document.querySelectorAll(".chart[data-chart-part][data-rendered=true]").forEach(function (other) {
      if (other === el || other.dataset.chartUrl !== el.dataset.chartUrl) { return; }
      other.dataset.zooming = "true";
      window.Plotly.relayout(other, update).then(function () { delete other.dataset.zooming; });
    });
  }
  function charts(root) {
    return root.matches && root.matches(".chart[data-chart-url]") ? [root] : root.querySelectorAll(".chart[data-chart-url]");
  }
  // What is on the screen is drawn first, and shown: a chart only near it has its answer fetched at
  // once but is drawn after those, one chart per frame, so the browser paints the charts in view
  // before spending its time on ones the reader has not scrolled to (drawing four Runtime charts
  // in the same task as the timeline held the whole first screen back until all five were drawn).
  var onScreenDrawn = Promise.resolve();
  var offScreenDrawn = Promise.resolve();
  function isOnScreen(el) {
    var box = el.getBoundingClientRect();
    return box.top < window.innerHeight && box.bottom > 0;
  }
  function afterNextPaint() {
    return new Promise(function (resolve) { requestAnimationFrame(function () { setTimeout(resolve, 0); }); });
  }
  function schedule(el) {
    if (isOnScreen(el)) {
      onScreenDrawn = Promise.all([onScreenDrawn, render(el)]);
      return;
    }
    fetchFigure(el.dataset.chartUrl).catch(function () {});  // render() says so if it fails again
    offScreenDrawn = Promise.all([offScreenDrawn, onScreenDrawn]).then(afterNextPaint).then(function () {
      return render(el);
    });
  }
  var NEAR_SCREEN = "600px 0px";  // drawn when this close: scrolling finds them drawn, or nearly
  var nearScreen = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { nearScreen.unobserve(entry.target); schedule(entry.target); }
    });
  }, {rootMargin: NEAR_SCREEN}) : null;
  function renderAll(root) {
    charts(root).forEach(function (el) { if (nearScreen) { nearScreen.observe(el); } else { schedule(el); } });
  }
  function keepFresh(el) {
    var seconds = Number(el.dataset.refreshSeconds);
    if (seconds > 0) {
      // A chart, or a group of charts sharing one answer; one not drawn yet waits until it is near.
      setInterval(function () {
        if (document.visibilityState === "visible") { forgetAnswers(el); renderAll(el); }
      }, seconds * 1000);
    }
  }
  function keepAllFresh(root) {
    if (root.matches && root.matches("[data-refresh-seconds]")) { keepFresh(root); }
    root.querySelectorAll("[data-refresh-seconds]").forEach(keepFresh);
  }
  function start() {
    renderAll(document);
    keepAllFresh(document);
  }
  // A deferred script runs once the document is parsed; this also covers it being loaded otherwise.
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  document.addEventListener("htmx:afterSwap", function (event) { forgetAnswers(event.target); renderAll(event.target); });
  // Charts htmx puts in place of a notice (their roll-ups were being built: partials/chart_building.html).
  document.addEventListener("htmx:load", function (event) {
    if (event.target === document.body || !event.target.querySelectorAll) { return; }  // the page: start() has it
    renderAll(event.target);
    keepAllFresh(event.target);
  });
})();
