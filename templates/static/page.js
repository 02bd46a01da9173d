// Sortable tables: click a header to sort its column (again: the other way). Cells sort by
// their data-sort attribute when they have one (numbers), else by their text.
document.querySelectorAll("table.sortable").forEach(function (table) {
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
