/**
 * The parts of the extension that need no JupyterLab: formatting, the code the profile
 * button sends, which cells are CUDA, which pair of rows a comparison takes, and checks
 * on what the kernel sends. Numbers are computed in Python; this only formats them.
 */

/** One timing result as the kernel's history sends it (perflab/labext.py). */
export interface IRow {
  id: string;
  name: string;
  median_ns: number;
  ci95_ns: [number, number];
  n: number;
  backend: string;
  device: string;
  /** "triton": a Triton kernel ran in Triton's interpreter; "none": none did; null: not recorded */
  interpreter: string | null;
  /** the precision its arithmetic ran in ("fp32", "bf16"...), null where unknown */
  dtype: string | null;
  created: string;
  warnings: string[];
  replayed: boolean;
}

/** A comparison as the kernel answers it (TimingResult.compare, perflab/labext.py). */
export interface IComparison {
  /** the whole answer, as `str(comparison)` writes it */
  text: string;
  /** false: the two ran on other devices or one in an interpreter; no ratio then */
  comparable: boolean;
  /** why they are not comparable ("" when they are) */
  why: string;
  /** what else differs and weighs on the ratio (the precisions) */
  notes: string[];
}

/** The kernel's `perflab info --json` document (the parts the status bar reads). */
export interface IInfo {
  backend?: unknown;
  devices?: unknown;
}

const TIME_UNITS: [number, string][] = [
  [1e9, 's'],
  [1e6, 'ms'],
  [1e3, 'us'],
  [1, 'ns']
];
/** Significant digits of a time: as many as perflab.model.units.format_ns shows. */
const TIME_DIGITS = 3;

/**
 * A time in nanoseconds in the largest unit that keeps it >= 1, and in the next one where
 * it rounds to 1000 of it (999.7 ns is "1 us"), as perflab.model.units.format_ns writes it
 * ("1.23 us"); "n/a" when not finite. Both are tested against the cases of
 * tests/data/format_ns_cases.json.
 */
export function formatNs(ns: number): string {
  if (!Number.isFinite(ns)) {
    return 'n/a';
  }
  let [scale, unit] = timeUnit(Math.abs(ns));
  let text = formatG(ns / scale, TIME_DIGITS);
  if (Math.abs(Number(text)) >= 1000 && scale < TIME_UNITS[0][0]) {
    [scale, unit] = timeUnit(scale * 1000);
    text = formatG(ns / scale, TIME_DIGITS);
  }
  return `${text} ${unit}`;
}

/** The largest time unit [scale in ns, name] not above `size` ns; ns below 1. */
function timeUnit(size: number): [number, string] {
  return TIME_UNITS.find(([scale]) => size >= scale) ?? TIME_UNITS[TIME_UNITS.length - 1];
}

/**
 * `x` as Python's `format(x, '.<digits>g')` writes it: `digits` significant digits (an
 * exact tie in binary rounds to even, where toPrecision would round it up), trailing zeros
 * dropped, and an exponent ("1e+03", "1e-05") when the rounded value is below 1e-4 or has
 * more than `digits` digits before the point.
 */
export function formatG(x: number, digits: number): string {
  if (x === 0) {
    return Object.is(x, -0) ? '-0' : '0';
  }
  const sign = x < 0 ? '-' : '';
  const [kept, exp] = roundedDigits(Math.abs(x), digits);
  if (exp < -4 || exp >= digits) {
    const power = `${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
    return `${sign}${pointAfter(kept, 1)}e${power}`;
  }
  const padded = exp < 0 ? '0'.repeat(-exp) + kept : kept;
  return sign + pointAfter(padded, Math.max(exp, 0) + 1);
}

/** `digits` with a decimal point after the first `whole`, trailing zeros dropped. */
function pointAfter(digits: string, whole: number): string {
  const fraction = digits.slice(whole).replace(/0+$/, '');
  return digits.slice(0, whole) + (fraction ? '.' + fraction : '');
}

/**
 * The first `digits` significant digits of `x` > 0, rounded half to even, and the decimal
 * exponent of the first. toExponential(100) gives 101 correctly rounded digits: enough to
 * tell an exact tie from a double beside it.
 */
function roundedDigits(x: number, digits: number): [string, number] {
  const [mantissa, power] = x.toExponential(100).split('e');
  const all = mantissa.replace('.', '');
  const rest = all.slice(digits);
  const tie = rest[0] === '5' && !/[1-9]/.test(rest.slice(1));
  const odd = Number(all[digits - 1]) % 2 === 1;
  let kept = all.slice(0, digits);
  let exp = Number(power);
  if (rest[0] > '5' || (rest[0] === '5' && (!tie || odd))) {
    const bumped = String(Number(kept) + 1);
    if (bumped.length > digits) {
      exp += 1; // 999 -> 1000: one more digit before the point
    }
    kept = bumped.slice(0, digits);
  }
  return [kept, exp];
}

/** ["1.23 ms", "(1.2-1.25 ms)"]: a median and its 95% interval, in the median's unit. */
export function medianParts(row: Pick<IRow, 'median_ns' | 'ci95_ns'>): [string, string] {
  const median = formatNs(row.median_ns);
  const unit = median.split(' ')[1];
  const scale = { s: 1e9, ms: 1e6, us: 1e3, ns: 1 }[unit] ?? 1;
  // as many digits as the median, written out in its unit (990-1010 ns, not 1.01e+03)
  const [lo, hi] = row.ci95_ns.map(v => Number((v / scale).toPrecision(TIME_DIGITS)));
  return [median, `(${lo}-${hi} ${unit})`];
}

/** "1.23 ms (1.2-1.25 ms)": a median with its 95% interval, in the median's unit. */
export function formatMedian(row: Pick<IRow, 'median_ns' | 'ci95_ns'>): string {
  return medianParts(row).join(' ');
}

/** The local time of day of an ISO timestamp ("" when it cannot be read). */
export function formatTime(iso: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) {
    return '';
  }
  const d = new Date(t);
  const two = (v: number) => String(v).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** The status bar's text: "H200 - CUDA", or "no GPU: host clock". */
export function statusText(info: IInfo): string {
  const devices = Array.isArray(info.devices) ? info.devices : [];
  if (info.backend !== 'cuda') {
    return 'no GPU: host clock';
  }
  const first = devices[0] as { name?: unknown } | undefined;
  const name = typeof first?.name === 'string' ? first.name : 'GPU';
  const short = name.replace(/^NVIDIA\s+/, '');
  const more = devices.length > 1 ? ` x${devices.length}` : '';
  return `${short}${more} - CUDA`;
}

/** How a row is called in the panel: "#3" for the history's "r3". */
export function rowLabel(id: string): string {
  return /^r\d+$/.test(id) ? `#${id.slice(1)}` : id;
}

/**
 * What a row ran on, as the panel shows it under the median: "cpu · CPU: x", then
 * "Triton interpreter" where a Triton kernel ran in it, and the precision where known.
 */
export function ranOn(row: Pick<IRow, 'backend' | 'device' | 'interpreter' | 'dtype'>): string {
  const interpreted = row.interpreter === 'triton' ? 'Triton interpreter' : '';
  return [row.backend, row.device, interpreted, row.dtype ?? ''].filter(Boolean).join(' · ');
}

/** The whole of a row, one fact a line: the panel's tooltip, so nothing is only cut off. */
export function rowText(row: IRow, isBaseline: boolean): string {
  const marks = (isBaseline ? ' (baseline)' : '') + (row.replayed ? ' [replayed]' : '');
  const when = formatTime(row.created);
  return [
    `${rowLabel(row.id)} ${row.name}${marks}`,
    `median ${formatMedian(row)}: 95% confidence interval, n = ${row.n} samples`,
    [ranOn(row), when].filter(Boolean).join(' · '),
    ...row.warnings.map(w => `⚠ ${w}`)
  ].join('\n');
}

/**
 * The kernel's answer to a comparison, checked (null when it is not one). An answer
 * without `comparable` (an older kernel side) is a comparison that made a ratio.
 */
export function checkComparison(value: unknown): IComparison | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = value as Record<string, unknown>;
  const notes = v.notes ?? [];
  if (
    typeof v.text !== 'string' ||
    !Array.isArray(notes) ||
    !notes.every(n => typeof n === 'string') ||
    (v.why !== undefined && typeof v.why !== 'string')
  ) {
    return null;
  }
  return {
    text: v.text,
    comparable: v.comparable !== false,
    why: typeof v.why === 'string' ? v.why : '',
    notes: notes as string[]
  };
}

/** The orders the panel offers: as run (the history's), fastest first, by name. */
export const SORT_KEYS = ['run', 'time', 'name'] as const;
export type SortKey = (typeof SORT_KEYS)[number];
export const SORT_LABELS: Record<SortKey, string> = {
  run: 'run order',
  time: 'time (median)',
  name: 'name'
};

/** ``value`` as a sort key ("run" when it is not one, e.g. a stale stored value). */
export function sortKey(value: unknown): SortKey {
  return SORT_KEYS.find(k => k === value) ?? 'run';
}

// numbers in names by value ("In[3]" before "In[12]"), case and accents ignored
const NAMES = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });

function medianOrder(row: Pick<IRow, 'median_ns'>): number {
  return Number.isNaN(row.median_ns) ? Infinity : row.median_ns;
}

/** The rows in ``key``'s order (a new array; ties keep the order they were run in). */
export function sortRows<R extends Pick<IRow, 'name' | 'median_ns'>>(rows: R[], key: SortKey): R[] {
  const sorted = [...rows];
  if (key === 'time') {
    sorted.sort((a, b) => medianOrder(a) - medianOrder(b));
  } else if (key === 'name') {
    sorted.sort((a, b) => NAMES.compare(a.name, b.name));
  }
  return sorted;
}

/**
 * The Python the profile button runs for a cell: perflab.labext.profile_cell times it as
 * `%%gpuprofile` with default options would (a cell that starts with `%%gpuprofile ...` with
 * its own options), without loading perflab's magics into the kernel. One expression, so it
 * leaves no name behind in the user's namespace; the source is quoted as a Python string.
 */
export function profileCode(source: string): string {
  return `__import__("perflab.labext").labext.profile_cell(get_ipython(), ${JSON.stringify(source)})`;
}

const CELL_MAGIC = /^\s*%%(\w+)/;
const SETUP_LINE = /^\s*(#.*|import\s.+|from\s+\S+\s+import\s.+|%(load_ext|reload_ext|matplotlib|config)\b.*)?$/;

/**
 * Why the profile button should not time a cell, or null when it should: an empty cell, a
 * cell magic other than `%%gpuprofile` (a `%%ptx` cell compiles; timing it would record the
 * cached compile's few milliseconds as if they were a kernel), or a cell that only imports.
 */
export function untimedReason(source: string): string | null {
  if (!source.trim()) {
    return 'the cell is empty: there is nothing to time';
  }
  const magic = CELL_MAGIC.exec(source);
  if (magic && magic[1] !== 'gpuprofile') {
    return (
      `a %%${magic[1]} cell runs its magic, not timed work` +
      (magic[1] === 'ptx'
        ? ' (%%ptx compiles; time a launch of the kernel with %%ptx --run, or in a cell of its own)'
        : '')
    );
  }
  if (!magic && source.split('\n').every(line => SETUP_LINE.test(line))) {
    return 'the cell only imports or sets up: there is nothing to time';
  }
  return null;
}

/** The CodeMirror mime type perflab registers for `%%ptx` cells of CUDA C++. */
export const CUDA_MIME = 'text/x-perflab-cuda';

/** Whether a cell's source is a `%%ptx` cell of CUDA C++ (`--lang triton` stays Python). */
export function isCudaCell(source: string): boolean {
  const first = source.split('\n', 1)[0];
  const m = /^\s*%%ptx(\s.*)?$/.exec(first);
  if (!m) {
    return false;
  }
  const args = m[1] ?? '';
  return !/(^|\s)--lang(=|\s+)triton(\s|$)/.test(args);
}

/**
 * The mime type a code cell should have: CUDA for a `%%ptx` CUDA cell, else the
 * notebook's own (the kernel's language).
 */
export function cellMime(source: string, notebookMime: string): string {
  return isCudaCell(source) ? CUDA_MIME : notebookMime;
}

/**
 * Which comparison two selected rows make: [result, baseline] for
 * `result.compare(baseline)`. The marked baseline is the baseline when it is one of
 * them; otherwise the older row is. One selected row compares with the marked baseline.
 * Returns null when the selection makes no comparison.
 */
export function comparePair(
  selected: string[],
  rows: Pick<IRow, 'id'>[],
  baseline: string | null
): [string, string] | null {
  const order = new Map(rows.map((r, i) => [r.id, i]));
  const ids = selected.filter(id => order.has(id));
  if (ids.length === 1 && baseline !== null && order.has(baseline) && ids[0] !== baseline) {
    return [ids[0], baseline];
  }
  if (ids.length !== 2) {
    return null;
  }
  let [a, b] = ids;
  if (a === baseline || (b !== baseline && order.get(a)! < order.get(b)!)) {
    [a, b] = [b, a];
  }
  return [a, b];
}

/** A row as sent by the kernel, checked (null when it is not one). */
export function checkRow(value: unknown): IRow | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const v = value as Record<string, unknown>;
  const strings = ['id', 'name', 'backend', 'device', 'created'];
  if (!strings.every(k => typeof v[k] === 'string')) {
    return null;
  }
  // what it ran on beyond the device: a string, or absent (null) where not recorded
  if (!['interpreter', 'dtype'].every(k => v[k] == null || typeof v[k] === 'string')) {
    return null;
  }
  const ci = v.ci95_ns;
  if (
    typeof v.median_ns !== 'number' ||
    !Array.isArray(ci) ||
    ci.length !== 2 ||
    !ci.every(x => typeof x === 'number') ||
    typeof v.n !== 'number' ||
    !Array.isArray(v.warnings) ||
    !v.warnings.every(w => typeof w === 'string')
  ) {
    return null;
  }
  return {
    id: v.id as string,
    name: v.name as string,
    median_ns: v.median_ns,
    ci95_ns: [ci[0], ci[1]],
    n: v.n,
    backend: v.backend as string,
    device: v.device as string,
    interpreter: optionalText(v.interpreter),
    dtype: optionalText(v.dtype),
    created: v.created as string,
    warnings: v.warnings as string[],
    replayed: v.replayed === true
  };
}

function optionalText(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** The rows of a history message, dropping any that are malformed. */
export function checkRows(value: unknown): IRow[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value.map(checkRow).filter((r): r is IRow => r !== null);
}

/**
 * The Python run in the kernel before the comm opens (names quoted as Python strings);
 * ``renamedFrom``: the notebook's name before a rename, whose history follows it. It opens
 * the notebook's history and loads none of perflab's magics.
 */
export function connectCode(notebookName: string, renamedFrom?: string): string {
  const renamed = renamedFrom === undefined ? '' : `, renamed_from=${JSON.stringify(renamedFrom)}`;
  return (
    'import perflab.labext as _perflab_labext\n' +
    `_perflab_labext.connect(${JSON.stringify(notebookName)}${renamed})\n` +
    'del _perflab_labext'
  );
}
