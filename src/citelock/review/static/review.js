// citelock review desk: keyboard shortcuts. Progressive enhancement only: every action is a plain link or form.
(function () {
  "use strict";

  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  function byKey(key) {
    var all = document.querySelectorAll("[data-key]");
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-key") === key) return all[i];
    }
    return null;
  }

  // The outcome form: one submission only, and a note or category before repair / escalate.
  var form = document.getElementById("outcome-form");
  var hint = document.getElementById("hint");
  var sent = false;
  if (form) {
    form.addEventListener("submit", function (ev) {
      if (sent) { ev.preventDefault(); return; }
      sent = true;
    });
  }

  function press(button) {
    var needs = button.getAttribute("data-needs");
    if (needs) {
      var field = document.getElementById(needs);
      if (field && !field.value.trim()) {
        if (hint) hint.textContent = (needs === "note" ? "A repair needs a note: " : "An escalation needs a category: ") +
          "fill it in, then press the key again.";
        field.focus();
        return;
      }
    }
    button.click();
  }

  // The queue: j / k move a selection over the rows, Enter opens it.
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.row"));
  var selected = -1;
  function select(index) {
    if (!rows.length) return;
    if (selected >= 0) rows[selected].classList.remove("selected");
    selected = Math.max(0, Math.min(rows.length - 1, index));
    rows[selected].classList.add("selected");
    rows[selected].scrollIntoView({ block: "nearest" });
  }
  rows.forEach(function (row, index) {
    row.addEventListener("click", function (ev) {
      if (ev.target.closest("a")) return;
      select(index);
      window.location.assign(row.getAttribute("data-href"));
    });
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var active = document.activeElement;
    if (typing(active)) {
      if (ev.key === "Escape") active.blur();
      return;
    }
    var key = ev.key;
    if (key === "?") {
      var help = document.getElementById("shortcuts");
      if (help) help.classList.toggle("shown");
      ev.preventDefault();
      return;
    }
    if (rows.length && (key === "j" || key === "k")) {
      select(selected + (key === "j" ? 1 : -1));
      ev.preventDefault();
      return;
    }
    if (rows.length && key === "Enter" && selected >= 0) {
      window.location.assign(rows[selected].getAttribute("data-href"));
      ev.preventDefault();
      return;
    }
    if (key === "n" || key === "c") {
      var field = document.getElementById(key === "n" ? "note" : "category");
      if (field) { field.focus(); ev.preventDefault(); }
      return;
    }
    var target = byKey(key);
    if (!target) return;
    ev.preventDefault();
    if (target.tagName === "BUTTON") press(target);
    else target.click();
  });
})();
