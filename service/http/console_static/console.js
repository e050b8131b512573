// rmq-namesrv console: a live filter for long tables, heartbeat ages that keep ticking, an opt-in refresh, and
// topic pages that reload when their route stream (GET /console/topics/<t>/events) reports a change.
// Nothing read from the page is ever written back as HTML: textContent only.
(function () {
  "use strict";

  function age(ms) {  // the same wording as service/display.py
    ms = Math.max(0, Math.floor(ms));
    if (ms < 1000) return ms + " ms";
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
    if (s < 86400) {
      var m = Math.floor((s % 3600) / 60);
      return Math.floor(s / 3600) + " h" + (m ? " " + m + " min" : "");
    }
    var h = Math.floor((s % 86400) / 3600);
    return Math.floor(s / 86400) + " d" + (h ? " " + h + " h" : "");
  }

  function filters() {
    document.querySelectorAll("input[data-filter]").forEach(function (input) {
      var table = document.getElementById(input.getAttribute("data-filter"));
      var counter = document.getElementById(input.getAttribute("data-count"));
      if (!table) return;
      function apply() {
        var q = input.value.trim().toLowerCase();
        var shown = 0;
        table.querySelectorAll("tbody tr").forEach(function (tr) {
          var hit = !q || tr.textContent.toLowerCase().indexOf(q) !== -1;
          tr.hidden = !hit;
          if (hit) shown += 1;
        });
        if (counter) counter.textContent = String(shown);
      }
      input.addEventListener("input", apply);
    });
  }

  function ticking() {
    var cells = document.querySelectorAll("td[data-age-ms]");
    if (!cells.length) return;
    var loaded = Date.now();
    setInterval(function () {
      var passed = Date.now() - loaded;
      cells.forEach(function (td) {
        td.textContent = age(Number(td.getAttribute("data-age-ms")) + passed);
      });
    }, 1000);
  }

  function refresh() {
    var box = document.getElementById("autorefresh");
    if (!box) return;
    var KEY = "namesrv.console.autorefresh";
    var timer = null;
    try { box.checked = window.localStorage.getItem(KEY) === "1"; } catch (e) { /* storage off: no memory */ }
    function arm() {
      clearTimeout(timer);
      if (box.checked) timer = setTimeout(function () { window.location.reload(); }, 5000);
    }
    box.addEventListener("change", function () {
      try { window.localStorage.setItem(KEY, box.checked ? "1" : "0"); } catch (e) { /* ignore */ }
      arm();
    });
    arm();
  }

  function live() {  // a topic page follows its route stream: reload as soon as the route differs from the page's
    var el = document.querySelector("[data-events]");
    if (!el || !window.EventSource) return;
    var shown = el.getAttribute("data-etag");
    var source = new EventSource(el.getAttribute("data-events"));
    source.addEventListener("route", function (e) {
      var data = JSON.parse(e.data);
      if (data.etag !== shown) { source.close(); window.location.reload(); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { filters(); ticking(); refresh(); live(); });
})();
