// A2A Hub dashboard: the little the server cannot do — cap the live feed, tick countdowns.
(function () {
  "use strict";
  var MAX_ROWS = 300;

  // Keep the live feed's DOM bounded however long the page stays open.
  function capFeed() {
    var body = document.getElementById("feed-rows");
    if (!body) return;
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }
  document.addEventListener("htmx:wsAfterMessage", capFeed);

  // Rows rendered with the page are not news: only rows pushed later flash as new.
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("#feed-rows tr.fresh").forEach(function (row) { row.classList.remove("fresh"); });
  });

  // Say whether the page is live (its websocket open); tests wait on body[data-live=open].
  function liveState(state) {
    document.body.dataset.live = state;
    var dot = document.getElementById("live-indicator");
    if (dot) { dot.textContent = state === "open" ? "live" : "reconnecting…"; dot.className = "badge " + (state === "open" ? "online" : "offline"); }
  }
  document.addEventListener("htmx:wsOpen", function () { liveState("open"); });
  document.addEventListener("htmx:wsClose", function () { liveState("closed"); });

  // A delegation chain wider or taller than its box scrolls to show the current task.
  function centreCurrentTask() {
    var wrap = document.querySelector(".chain-wrap");
    var node = wrap && wrap.querySelector(".node.current rect");
    if (!node) return;
    var box = node.getBoundingClientRect(), view = wrap.getBoundingClientRect();
    wrap.scrollLeft += box.left - view.left - (wrap.clientWidth - box.width) / 2;
    wrap.scrollTop += box.top - view.top - (wrap.clientHeight - box.height) / 2;
  }
  document.addEventListener("DOMContentLoaded", centreCurrentTask);
  document.addEventListener("htmx:afterSettle", centreCurrentTask);

  // A form swapped in with problems shows the first one, next to its field, in view.
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    var form = target && (target.isConnected ? target : document.getElementById(target.id));
    if (!form || !form.matches || !form.matches("form")) return;
    var field = form.querySelector("[aria-invalid=true]");
    if (!field) return;
    field.scrollIntoView({ block: "center" });
    field.focus({ preventScroll: true });
  });

  // Enter in a field clicks the button that goes with it, never by surprise the form's first
  // (what a browser does: in the inbox's bulk bar that is "Approve selected", in the policy
  // editor "Save"). In a form marked data-enter, Enter in a field clicks the button whose id
  // the field's nearest data-enter names, and does nothing where that is empty.
  document.addEventListener("keydown", function (event) {
    var field = event.target;
    if (event.key !== "Enter" || event.isComposing || field.tagName !== "INPUT" || !field.form) return;
    if (!field.form.hasAttribute("data-enter")) return;
    var holder = field.form.contains(field) && field.closest("[data-enter]") || field.form;
    event.preventDefault();
    var button = document.getElementById(holder.getAttribute("data-enter") || "");
    if (button && !button.disabled) button.click();
  });

  // Deadlines count down: <span data-deadline="ISO">.
  function countdowns() {
    var now = Date.now();
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var ms = Date.parse(el.getAttribute("data-deadline")) - now, left = Math.round(ms / 1000);
      if (isNaN(left)) return;
      // The last minutes before a deadline stand out (data-warn, on it or around it:
      // HUB_NOTIFY_WARN_SECONDS),
      // and an escalation's card says so in words, as the server renders it.
      var holder = el.closest("[data-warn]");
      var warn = parseInt((holder && holder.getAttribute("data-warn")) || "300", 10), soon = ms > 0 && ms <= warn * 1000; // as the server decides it
      el.classList.toggle("soon", soon);
      var card = el.closest(".escalation.pending");
      var warning = card && card.querySelector(".expiry-warning");
      if (warning) {
        card.classList.toggle("expiring", soon);
        warning.hidden = !soon;
        warning.textContent = soon ? "expiring soon" : "";
      }
      if (left <= 0) { el.textContent = "overdue"; el.classList.add("overdue"); return; }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = "in " + (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
    });
  }
  setInterval(countdowns, 1000);
  document.addEventListener("DOMContentLoaded", countdowns);
  document.addEventListener("htmx:afterSettle", countdowns);

  // A trace's span opens in the side panel (htmx fills it); its × closes it.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.target.id === "span-panel") event.target.hidden = false;
  });
  document.addEventListener("click", function (event) {
    var close = event.target.closest && event.target.closest(".span-close");
    var panel = close && close.closest(".span-panel");
    if (panel) panel.hidden = true;
  });
})();
