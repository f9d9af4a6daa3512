// fitbench sizing page: collects the form, asks the server for the rendered report fragment and swaps it in.
// No sizing formula lives here: every number comes from the server (GET /fragment, same estimator as the CLI).
(function () {
  "use strict";
  var form = document.getElementById("fb-form");
  var out = document.getElementById("fb-report");
  var err = document.getElementById("fb-error");
  var status = document.getElementById("fb-status");
  var seq = 0;
  function query() {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (v, k) { params.append(k, String(v).trim()); });
    return params.toString();
  }
  function update() {
    var q = query();
    var mine = ++seq;
    status.textContent = status.getAttribute("data-loading");
    document.body.setAttribute("data-state", "loading");
    fetch("/fragment?" + q, { headers: { "Accept": "text/html" } })
      .then(function (r) { return r.text().then(function (t) { return { ok: r.ok, text: t }; }); })
      .then(function (res) {
        if (mine !== seq) { return; }  // a newer request is on its way
        if (res.ok) {
          out.innerHTML = res.text;
          err.textContent = "";
          err.hidden = true;
          history.replaceState(null, "", "/?" + q);
          document.getElementById("fb-json").setAttribute("href", "/api/report?" + q);
        } else {
          err.textContent = res.text;
          err.hidden = false;
        }
        status.textContent = "";
        document.body.setAttribute("data-state", res.ok ? "ready" : "error");
      })
      .catch(function (e) {
        if (mine !== seq) { return; }
        err.textContent = String(e);
        err.hidden = false;
        status.textContent = "";
        document.body.setAttribute("data-state", "error");
      });
  }
  var custom = document.getElementById("fb-custom");
  var hardware = document.getElementById("f-hardware");
  function showCustom() {  // presentation only: the custom-hardware fields when "custom" is chosen
    if (custom && hardware && hardware.value === "custom") { custom.hidden = false; }
  }
  form.addEventListener("submit", function (ev) { ev.preventDefault(); update(); });
  form.addEventListener("change", function (ev) {
    if (ev.target && ev.target.name === "lang") { window.location.search = query(); return; }  // relabel page
    if (ev.target === hardware) {
      showCustom();
      var figures = ["f-memory_gib", "f-bandwidth_gbs"].map(function (id) { return document.getElementById(id); });
      if (hardware.value === "custom" && figures.some(function (f) { return !f.value; })) {
        status.textContent = "";  // wait for the figures a custom device needs
        return;
      }
    }
    update();
  });
  document.body.setAttribute("data-state", "ready");
})();
