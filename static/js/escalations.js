// The escalation inbox's keyboard and selection: j/k move, a approve, r reject, e edit,
// c claim, x select, / search, ? the list of shortcuts. The current card is remembered by
// its id, so a live refresh of the list keeps it.
(function () {
  "use strict";
  var current = null;

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll("#escalation-list article.escalation.pending"));
  }
  function card() {
    return current && document.querySelector('#escalation-list article.escalation.pending[data-pk="' + current + '"]');
  }
  function mark() {
    document.querySelectorAll("article.escalation.current").forEach(function (el) { el.classList.remove("current"); });
    var el = card();
    if (el) el.classList.add("current");
  }
  function move(step) {
    var all = cards();
    if (!all.length) return;
    var at = all.indexOf(card());
    var next = all[Math.max(0, Math.min(all.length - 1, at < 0 ? 0 : at + step))];
    current = next.dataset.pk;
    mark();
    next.scrollIntoView({ block: "nearest" });
  }
  function press(selector) {
    var el = card();
    var button = el && el.querySelector(selector);
    if (!button || button.disabled) return;
    // A card swapped in a moment ago may not be wired up by htmx yet: wire it now, so the
    // press is an htmx request and never a plain form submission.
    if (window.htmx) window.htmx.process(button.closest("form") || button);
    button.click();
  }
  function count() {
    var n = 0;
    document.querySelectorAll("input.pick:checked").forEach(function (box) { n += box.value.split(",").length; });
    var out = document.getElementById("bulk-count");
    if (out) out.textContent = String(n);
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    var typing = target.closest && target.closest("input, textarea, select, [contenteditable]");
    if (typing) {
      if (event.key === "Escape") target.blur();
      return;
    }
    var el;
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": press(".act-approve"); break;
      case "c": press(".act-claim, .act-release"); break;
      case "r":
        el = card() && card().querySelector("input[name=reason]");
        if (el) el.focus();
        break;
      case "e":
        el = card() && card().querySelector("details.edit");
        if (el) { el.open = true; (el.querySelector("input, textarea, select") || el).focus(); }
        break;
      case "x":
        el = card() && card().querySelector("input.pick");
        if (el) { el.checked = !el.checked; count(); }
        break;
      case "/":
        el = document.getElementById("escalation-search");
        if (el) el.focus();
        break;
      case "?":
        el = document.getElementById("shortcuts");
        if (el && !el.open) el.showModal();
        break;
      default: return;
    }
    event.preventDefault();
  });

  document.addEventListener("change", function (event) {
    if (event.target.classList && event.target.classList.contains("pick")) count();
  });
  document.addEventListener("click", function (event) {
    if (event.target.id !== "bulk-all") return;
    document.querySelectorAll("#escalation-list input.pick").forEach(function (box) { box.checked = true; });
    count();
  });
  document.addEventListener("htmx:afterSettle", function () { mark(); count(); });
  document.addEventListener("DOMContentLoaded", function () { mark(); count(); });
})();
