// orksync's web view, progressive enhancement: the pages work without this file. With it,
// the page listens to the agent's change stream (server-sent events, which carry no data)
// and, after a change, fetches itself again and swaps its <main> in place.
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch || !window.DOMParser) { return; }
  if (!document.querySelector("form.logout")) { return; }  // the login page stays still
  var live = document.getElementById("live");
  var pending = false;
  var last = 0;
  function say(text) { if (live) { live.textContent = text; } }
  function refresh() {
    pending = false;
    last = Date.now();
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null) { say("not updated: reload"); return; }
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var current = document.getElementById("main");
        if (fresh && current) {
          current.replaceWith(document.importNode(fresh, true));
          say("live · updated " + new Date().toLocaleTimeString());
        }
      })
      .catch(function () { say("not updated: reload"); });
  }
  var stream = new EventSource(document.querySelector("link[rel=stylesheet]")
    .getAttribute("href").replace(/static\/ui\.css$/, "events"));
  stream.addEventListener("open", function () { say("live"); });
  stream.addEventListener("error", function () { say("live updates paused"); });
  stream.addEventListener("changed", function () {
    if (pending) { return; }
    pending = true;
    window.setTimeout(refresh, Math.max(0, 2000 - (Date.now() - last)));
  });
}());
