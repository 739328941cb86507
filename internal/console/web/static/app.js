// callgate admin: optional niceties only. Every page works without this
// file: forms post and links navigate on their own.
(function () {
  "use strict";

  // Ask before a form marked data-confirm is sent.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    var msg = form && form.getAttribute && form.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      ev.preventDefault();
    }
  });

  // Pages that change by themselves (a running replay job) reload while
  // they do, unless the operator is typing.
  var refresh = document.body && parseInt(document.body.getAttribute("data-refresh"), 10);
  if (refresh > 0) {
    window.setTimeout(function () {
      var a = document.activeElement;
      if (a && (a.tagName === "TEXTAREA" || a.tagName === "INPUT")) {
        return;
      }
      window.location.reload();
    }, refresh);
  }

  // Show times in the reader's zone as a tooltip (the page shows UTC).
  var times = document.querySelectorAll("time[datetime]");
  for (var i = 0; i < times.length; i++) {
    var d = new Date(times[i].getAttribute("datetime"));
    if (!isNaN(d.getTime()) && !times[i].title) {
      times[i].title = d.toLocaleString();
    }
  }
})();
