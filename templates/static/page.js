// Sortable tables: click a header to sort its column (again: the other way). Cells sort by
// their data-sort attribute when they have one (numbers), else by their text.
document.querySelectorAll("table.sortable, table.grid").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.style.cursor = "pointer";
    th.title = "Sort by this column";
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var up = th.getAttribute("aria-sort") !== "ascending";
      function key(row) {
        var cell = row.cells[col];
        if (!cell) return "";
        var v = cell.getAttribute("data-sort");
        return v !== null && v !== "" && !isNaN(v) ? parseFloat(v) : (v || cell.textContent.trim()).toLowerCase();
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return up ? c : -c;
      });
      table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});

// "Copy as ticket": put an action's Markdown (its <pre> in the same .ticket block) on the
// clipboard; where the clipboard API is refused (some file:// pages), select the text instead.
document.querySelectorAll("button.copy-ticket").forEach(function (button) {
  button.addEventListener("click", function () {
    var pre = button.parentNode.querySelector("pre");
    var text = pre.textContent;
    function selectIt() {
      button.parentNode.querySelector("details").open = true;
      var range = document.createRange();
      range.selectNodeContents(pre);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      button.textContent = "Selected: press Ctrl+C";
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy as ticket"; }, 1500);
      }, selectIt);
    } else {
      selectIt();
    }
  });
});

// Sorting by keyboard: a sortable header is focusable and Enter or Space sorts it.
document.querySelectorAll("table.sortable thead th, table.grid thead th").forEach(function (th) {
  th.tabIndex = 0;
  th.setAttribute("role", "button");
  th.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); th.click(); }
  });
});

// The board's filters: status, workload and owner; a status count sets the status filter.
(function () {
  var selects = document.querySelectorAll("form.filters select[data-filter]");
  var rows = document.querySelectorAll("table.board tbody tr");
  if (!selects.length) return;
  function apply() {
    var want = {};
    selects.forEach(function (s) { want[s.getAttribute("data-filter")] = s.value; });
    rows.forEach(function (r) {
      var shown = Object.keys(want).every(function (k) {
        return !want[k] || r.getAttribute("data-" + k) === want[k];
      });
      r.hidden = !shown;
    });
  }
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  document.querySelectorAll("button[data-filter-status]").forEach(function (b) {
    b.addEventListener("click", function () {
      var s = document.querySelector('select[data-filter="status"]');
      s.value = s.value === b.getAttribute("data-filter-status") ? "" : b.getAttribute("data-filter-status");
      apply();
    });
  });
})();

// Folded sections: a link to something inside one (an action, a shape) opens it first.
function openTo(hash) {
  if (!hash || hash.length < 2) return;
  var target = document.getElementById(decodeURIComponent(hash.slice(1)));
  for (var el = target; el; el = el.parentElement) {
    if (el.tagName === "DETAILS") el.open = true;
  }
  if (target) target.scrollIntoView();
}
document.addEventListener("click", function (ev) {
  var a = ev.target.closest && ev.target.closest('a[href^="#"]');
  if (a) { ev.preventDefault(); history.pushState(null, "", a.getAttribute("href")); openTo(a.getAttribute("href")); }
});
window.addEventListener("hashchange", function () { openTo(location.hash); });
openTo(location.hash);
