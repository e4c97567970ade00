// The escalation inbox's keyboard and selection: j/k move, a approve, r reject, e edit,
// c claim, x select, o open its page, / search, ? the list of shortcuts. The current card
// (or line of the dense list) is remembered by its id, so a live refresh of the list keeps
// it. "Select all N matching" makes the bulk bar act on the whole view, confirmed with N.
(function () {
  "use strict";
  var current = null;

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll("#escalation-list .escalation.pending"));
  }
  function card() {
    return current && document.querySelector('#escalation-list .escalation.pending[data-pk="' + current + '"]');
  }
  function mark() {
    document.querySelectorAll(".escalation.current").forEach(function (el) { el.classList.remove("current"); });
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
  // A line of the dense list approves with its page's address + approve/ (its button carries
  // no address: the list's bytes count).
  function approveLine(button) {
    var line = button.closest("tr.escalation"), link = line && line.querySelector("a.open");
    if (!link || !window.htmx) return;
    button.disabled = true;
    window.htmx.ajax("POST", link.getAttribute("href") + "approve/", { source: button, values: { line: "1" }, swap: "none" });
  }
  function press(selector) {
    var el = card();
    var button = el && el.querySelector(selector);
    if (!button || button.disabled) return;
    if (el.tagName === "TR" && button.classList.contains("act-approve")) { approveLine(button); return; }
    // A card swapped in a moment ago may not be wired up by htmx yet: wire it now, so the
    // press is an htmx request and never a plain form submission.
    if (window.htmx) window.htmx.process(button.closest("form") || button);
    button.click();
  }
  function matching() {
    var scope = document.getElementById("bulk-scope");
    return scope && !scope.disabled;
  }
  function setMatching(on) {
    var scope = document.getElementById("bulk-scope");
    if (scope) scope.disabled = !on;
  }
  function total() {
    var all = document.getElementById("bulk-matching");
    return all ? all.getAttribute("data-total") : "0";
  }
  function count() {
    var n = 0;
    document.querySelectorAll("input.pick:checked").forEach(function (box) { n += box.value.split(",").length; });
    var out = document.getElementById("bulk-count");
    if (out) out.textContent = matching() ? "all " + total() + " matching" : String(n);
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
      case "o":
      case "Enter":
        el = card() && card().querySelector("a.open");
        if (el) el.click(); else return;
        break;
      case "x":
        el = card() && card().querySelector("input.pick");
        if (el) { el.checked = !el.checked; setMatching(false); count(); }
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
    if (event.target.classList && event.target.classList.contains("pick")) { setMatching(false); count(); }
  });
  document.addEventListener("click", function (event) {
    var line = event.target.closest && event.target.closest("tr.escalation .act-approve");
    if (line) { approveLine(line); return; }
    var id = event.target.id;
    if (id !== "bulk-all" && id !== "bulk-matching") return;
    document.querySelectorAll("#escalation-list input.pick").forEach(function (box) { box.checked = true; });
    setMatching(id === "bulk-matching");
    count();
  });
  // A bulk decision on every match is confirmed with its count first.
  document.addEventListener("htmx:confirm", function (event) {
    if (event.target.id !== "bulk" || !matching()) return;
    var trigger = event.detail.triggeringEvent, button = trigger && trigger.submitter;
    var verb = button ? button.textContent.replace(/ selected$/, "") : "Decide";
    event.preventDefault();
    if (window.confirm(verb + " all " + total() + " escalations matching this view?")) event.detail.issueRequest(true);
  });
  // Once decided, the view's selection is spent.
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.target.id === "bulk" && event.detail.successful) {
      setMatching(false);
      document.querySelectorAll("input.pick:checked").forEach(function (box) { box.checked = false; });
      count();
    }
  });
  // Items decided anywhere leave the page at once (the live frame names them), but one this
  // page is deciding, or just decided, stays with its notice until the list is drawn again.
  function dropDecided() {
    var holder = document.getElementById("escalations-decided");
    var ids = holder ? (holder.getAttribute("data-ids") || "").split(" ") : [];
    ids.forEach(function (pk) {
      var el = pk && document.getElementById("escalation-" + pk);
      if (!el) return;
      // Kept: one this page is deciding now (its answer comes to it) or has just decided.
      if (el.querySelector(".htmx-request")) return;
      var notice = el.querySelector("#escalation-notice-" + pk + ", .notice");
      if (notice && notice.textContent.trim()) return;
      el.remove();
    });
    if (holder) holder.setAttribute("data-ids", "");
    count();
  }
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    if (event.target && event.target.id === "escalations-decided") dropDecided();
  });
  document.addEventListener("htmx:afterSettle", function () { mark(); count(); });
  // A link to an item in the list (/escalations/#escalation-N, as notifications wrote them)
  // opens the item's own page when the item is not on this page of the list.
  function followAnchor() {
    var found = /^#escalation-(\d+)$/.exec(window.location.hash);
    if (found && !document.getElementById("escalation-" + found[1])) {
      window.location.replace(window.location.pathname.replace(/\/?$/, "/") + found[1] + "/");
    }
  }
  document.addEventListener("DOMContentLoaded", function () { followAnchor(); mark(); count(); });
})();
