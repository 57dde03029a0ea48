// Click a column header of a perflab table marked "perflab-sortable" to sort its rows by that
// column; click again to reverse. Times are read with their unit (ns, us, ms, s) and sign,
// counts written "3 -> 4" by the test side (the number after the arrow), "-" (absent) as
// nothing; other columns sort as text. Where scripts do not run (an untrusted notebook,
// GitHub), the table keeps the order it was written in: largest change first.
function perflabSortable(rootId) {
  const root = document.getElementById(rootId);
  if (!root) return;
  const scale = { ns: 1, us: 1e3, "\u00b5s": 1e3, ms: 1e6, s: 1e9 };
  const number = /^([+\-\u2212]?)(\d+(?:\.\d+)?(?:e[+\-]?\d+)?)\s*(ns|us|\u00b5s|ms|s)?$/i;
  function valueOf(cell) {
    let text = cell.textContent.trim();
    const arrow = text.lastIndexOf("\u2192");
    if (arrow >= 0) text = text.slice(arrow + 1).trim();
    if (text === "-" || text === "") return { num: -Infinity, text: "" };
    const m = number.exec(text.replace(/,/g, ""));
    if (!m) return { num: NaN, text: text.toLowerCase() };
    const sign = m[1] === "-" || m[1] === "\u2212" ? -1 : 1;
    return { num: sign * parseFloat(m[2]) * (m[3] ? scale[m[3].toLowerCase()] : 1), text };
  }
  function compare(a, b) {
    if (!Number.isNaN(a.num) && !Number.isNaN(b.num)) return a.num - b.num;
    return a.text < b.text ? -1 : a.text > b.text ? 1 : 0;
  }
  for (const table of root.querySelectorAll("table.perflab-sortable")) {
    const body = table.tBodies[0];
    const heads = table.tHead ? [...table.tHead.rows[0].cells] : [];
    heads.forEach((th, col) => {
      if (!th.textContent.trim()) return; // the bars' column follows the change column
      th.style.cursor = "pointer";
      th.title = "sort by " + th.textContent.trim();
      th.addEventListener("click", () => {
        const down = th.dataset.sorted !== "down";
        for (const other of heads) {
          delete other.dataset.sorted;
          other.textContent = other.textContent.replace(/ [\u25b2\u25bc]$/, "");
        }
        th.dataset.sorted = down ? "down" : "up";
        th.textContent += down ? " \u25bc" : " \u25b2";
        const rows = [...body.rows].map((row, i) => ({ row, i, v: valueOf(row.cells[col]) }));
        rows.sort((a, b) => (down ? compare(b.v, a.v) : compare(a.v, b.v)) || a.i - b.i);
        for (const r of rows) body.appendChild(r.row);
      });
    });
  }
}
