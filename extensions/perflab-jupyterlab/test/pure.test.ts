import { describe, expect, it } from 'vitest';

import {
  checkComparison,
  checkRow,
  checkRows,
  comparePair,
  connectCode,
  CUDA_MIME,
  cellMime,
  formatMedian,
  formatG,
  formatNs,
  formatTime,
  isCudaCell,
  medianParts,
  profileCode,
  ranOn,
  untimedReason,
  rowLabel,
  rowText,
  sortKey,
  sortRows,
  statusText
} from '../src/pure';
// the table perflab.model.units.format_ns is tested against too (tests/test_units.py)
import FORMAT_NS_CASES from '../../../tests/data/format_ns_cases.json';
// the code the profile button sends for each source; the kernel side runs each one
import PROFILE_CELL_CASES from '../../../tests/data/profile_cell_code.json';

const row = {
  id: 'r1',
  name: 'matmul',
  median_ns: 1234567,
  ci95_ns: [1200000, 1250000],
  n: 40,
  backend: 'cpu',
  device: 'CPU: x',
  interpreter: 'none',
  dtype: null,
  created: '2026-01-02T03:04:05+00:00',
  warnings: ['noisy'],
  replayed: false
};

describe('formatNs', () => {
  it('writes every case of the table format_ns is tested against', () => {
    for (const { ns, text } of FORMAT_NS_CASES.cases) {
      expect(formatNs(Number(ns)), `formatNs(${ns})`).toBe(text);
    }
  });

  it('picks the unit that keeps three significant digits', () => {
    expect(formatNs(12)).toBe('12 ns');
    expect(formatNs(1234)).toBe('1.23 us');
    expect(formatNs(1234567)).toBe('1.23 ms');
    expect(formatNs(NaN)).toBe('n/a');
  });

  it('gives the interval in the median unit', () => {
    expect(formatMedian(row as never)).toBe('1.23 ms (1.2-1.25 ms)');
    expect(formatMedian({ median_ns: 999, ci95_ns: [990, 1010] })).toBe('999 ns (990-1010 ns)');
  });
});

describe('formatG', () => {
  it("writes numbers as Python's '.3g' does", () => {
    expect(formatG(1.125, 3)).toBe('1.12'); // an exact tie: to even
    expect(formatG(1.375, 3)).toBe('1.38');
    expect(formatG(99.95, 3)).toBe('100'); // 99.9500000000000028...: above the tie
    expect(formatG(999.5, 3)).toBe('1e+03');
    expect(formatG(0.00012345, 3)).toBe('0.000123');
    expect(formatG(-1.5e-7, 2)).toBe('-1.5e-07');
    expect(formatG(123456, 6)).toBe('123456');
    expect(formatG(-0, 3)).toBe('-0');
  });
});

describe('medianParts', () => {
  it('splits the median from its interval, so that each can keep to one line', () => {
    expect(medianParts({ median_ns: 7995000, ci95_ns: [5177000, 18430000] })).toEqual([
      '8 ms',
      '(5.18-18.4 ms)'
    ]);
  });
});

describe('rowText', () => {
  it('holds every part of the row, one line each, warnings last', () => {
    const text = rowText({ ...row, replayed: true }, true);
    const lines = text.split('\n');
    expect(lines[0]).toBe('#1 matmul (baseline) [replayed]');
    expect(lines[1]).toBe('median 1.23 ms (1.2-1.25 ms): 95% confidence interval, n = 40 samples');
    expect(lines[2]).toMatch(/^cpu · CPU: x · \d\d:04:05$/);
    expect(lines.slice(3)).toEqual(['⚠ noisy']);
  });

  it('leaves out what a row does not have', () => {
    const plain = { ...row, created: 'unknown', warnings: [] };
    expect(rowText(plain, false).split('\n')).toEqual([
      '#1 matmul',
      'median 1.23 ms (1.2-1.25 ms): 95% confidence interval, n = 40 samples',
      'cpu · CPU: x'
    ]);
  });
});

describe('ranOn', () => {
  it('says where a result ran, with Triton interpreter and its precision where known', () => {
    expect(ranOn(row)).toBe('cpu · CPU: x');
    expect(ranOn({ ...row, interpreter: 'triton', dtype: 'fp32' })).toBe(
      'cpu · CPU: x · Triton interpreter · fp32'
    );
    expect(ranOn({ ...row, interpreter: null, dtype: 'bf16' })).toBe('cpu · CPU: x · bf16');
    const text = rowText({ ...row, interpreter: 'triton' }, false);
    expect(text.split('\n')[2]).toMatch(/^cpu · CPU: x · Triton interpreter · \d\d:04:05$/);
  });
});

describe('checkComparison', () => {
  const refused = {
    type: 'comparison',
    comparable: false,
    why: "b ran on the CPU in Triton's interpreter, a on the CPU without it",
    ratio: null,
    notes: [],
    text: "b vs a: not comparable: b ran on the CPU in Triton's interpreter"
  };

  it('reads a refusal as not comparable, with its reason and no ratio', () => {
    expect(checkComparison(refused)).toEqual({
      text: refused.text,
      comparable: false,
      why: refused.why,
      notes: []
    });
  });

  it('reads a ratio, its notes, and an answer from before comparable was sent', () => {
    const notes = ['the precisions differ (b: bf16, a: fp32)'];
    const ratio = { text: 'b vs a: time ratio 0.5', comparable: true, why: '', notes };
    expect(checkComparison(ratio)).toEqual({ ...ratio });
    expect(checkComparison({ text: 'b vs a: time ratio 0.5' })).toEqual({
      text: 'b vs a: time ratio 0.5',
      comparable: true,
      why: '',
      notes: []
    });
  });

  it('drops what is not a comparison', () => {
    expect(checkComparison(null)).toBeNull();
    expect(checkComparison({ text: 3 })).toBeNull();
    expect(checkComparison({ ...refused, notes: [1] })).toBeNull();
    expect(checkComparison({ ...refused, why: 2 })).toBeNull();
  });
});

describe('sortRows', () => {
  const rows = [
    { id: 'r1', name: 'In[12]', median_ns: 300 },
    { id: 'r2', name: 'matmul', median_ns: 100 },
    { id: 'r3', name: 'In[3]', median_ns: NaN },
    { id: 'r4', name: 'Copy', median_ns: 100 },
    { id: 'r5', name: 'in[3]', median_ns: 50 }
  ];
  const ids = (key: 'run' | 'time' | 'name') => sortRows(rows, key).map(r => r.id);

  it('orders by median, fastest first, ties as run, an unreadable median last', () => {
    expect(ids('time')).toEqual(['r5', 'r2', 'r4', 'r1', 'r3']);
  });

  it('orders by name with numbers by value and case ignored, ties as run', () => {
    expect(ids('name')).toEqual(['r4', 'r3', 'r5', 'r1', 'r2']);
  });

  it('keeps the run order, and never reorders the rows it is given', () => {
    expect(ids('run')).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
    sortRows(rows, 'time');
    expect(rows.map(r => r.id)).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
  });

  it('reads a stored key, and falls back to the run order', () => {
    expect(sortKey('time')).toBe('time');
    expect(sortKey('name')).toBe('name');
    expect(sortKey('median')).toBe('run');
    expect(sortKey(null)).toBe('run');
  });
});

describe('formatTime', () => {
  it('reads ISO timestamps and refuses others', () => {
    expect(formatTime(row.created)).toMatch(/^\d\d:04:05$/);
    expect(formatTime('yesterday')).toBe('');
  });
});

describe('statusText', () => {
  it('names the first GPU and CUDA', () => {
    expect(statusText({ backend: 'cuda', devices: [{ name: 'NVIDIA H200' }] })).toBe(
      'H200 - CUDA'
    );
    expect(
      statusText({ backend: 'cuda', devices: [{ name: 'NVIDIA H100' }, { name: 'NVIDIA H100' }] })
    ).toBe('H100 x2 - CUDA');
  });

  it('says plainly when there is no GPU', () => {
    expect(statusText({ backend: 'cpu', devices: [{ name: 'Xeon' }] })).toBe(
      'no GPU: host clock'
    );
    expect(statusText({})).toBe('no GPU: host clock');
  });
});

describe('rowLabel', () => {
  it('numbers rows as the history does', () => {
    expect(rowLabel('r12')).toBe('#12');
    expect(rowLabel('x')).toBe('x');
  });
});

describe('profileCode', () => {
  it('calls perflab.labext.profile_cell with the source, loading no magic', () => {
    expect(profileCode('x = 1\ny = x')).toBe(
      '__import__("perflab.labext").labext.profile_cell(get_ipython(), "x = 1\\ny = x")'
    );
    expect(profileCode('%%gpuprofile --budget 10\nx = 1')).not.toMatch(/^%%|load_ext/);
  });

  it('quotes every source as the Python the kernel runs (tests/test_profile_button.py)', () => {
    expect(PROFILE_CELL_CASES.length).toBeGreaterThan(5);
    for (const { source, code } of PROFILE_CELL_CASES) {
      expect(profileCode(source)).toBe(code);
    }
  });
});

describe('isCudaCell', () => {
  it('takes %%ptx cells as CUDA', () => {
    expect(isCudaCell('%%ptx\n__global__ void k() {}')).toBe(true);
    expect(isCudaCell('%%ptx --arch sm_90a --block 256\n__global__ void k() {}')).toBe(true);
    expect(isCudaCell('%%ptx --lang cuda\nx')).toBe(true);
  });

  it('keeps Triton cells and everything else as they are', () => {
    expect(isCudaCell('%%ptx --lang triton\n@triton.jit')).toBe(false);
    expect(isCudaCell('%%ptx --lang=triton --arch sm_90\n')).toBe(false);
    expect(isCudaCell('%%ptxfoo\n')).toBe(false);
    expect(isCudaCell('x = 1\n%%ptx')).toBe(false);
    expect(isCudaCell('')).toBe(false);
  });

  it('gives the notebook mime type to other cells', () => {
    expect(cellMime('%%ptx\n', 'text/x-ipython')).toBe(CUDA_MIME);
    expect(cellMime('%%ptx --lang triton\n', 'text/x-ipython')).toBe('text/x-ipython');
  });
});

describe('comparePair', () => {
  const rows = [{ id: 'r1' }, { id: 'r2' }, { id: 'r3' }];

  it('compares the newer of two rows against the older', () => {
    expect(comparePair(['r1', 'r3'], rows, null)).toEqual(['r3', 'r1']);
    expect(comparePair(['r3', 'r1'], rows, null)).toEqual(['r3', 'r1']);
  });

  it('takes the marked baseline as the baseline', () => {
    expect(comparePair(['r1', 'r3'], rows, 'r3')).toEqual(['r1', 'r3']);
    expect(comparePair(['r2'], rows, 'r1')).toEqual(['r2', 'r1']);
  });

  it('makes no comparison of one row alone, three rows or unknown ids', () => {
    expect(comparePair(['r2'], rows, null)).toBeNull();
    expect(comparePair(['r1'], rows, 'r1')).toBeNull();
    expect(comparePair(['r1', 'r2', 'r3'], rows, null)).toBeNull();
    expect(comparePair(['r1', 'r9'], rows, null)).toBeNull();
  });
});

describe('checkRow', () => {
  it('keeps a well-formed row', () => {
    expect(checkRow(row)).toEqual(row);
    expect(checkRows([row, { id: 3 }, null])).toEqual([row]);
    expect(checkRows('nope')).toEqual([]);
  });

  it('reads what a row ran on as unknown where an older kernel side sent none', () => {
    const { interpreter: _i, dtype: _d, ...older } = row;
    expect(checkRow(older)).toEqual({ ...row, interpreter: null, dtype: null });
    expect(checkRow({ ...row, interpreter: 'triton', dtype: 'tf32' })).toEqual({
      ...row,
      interpreter: 'triton',
      dtype: 'tf32'
    });
  });

  it('drops rows with wrong types', () => {
    expect(checkRow({ ...row, interpreter: 1 })).toBeNull();
    expect(checkRow({ ...row, dtype: ['fp32'] })).toBeNull();
    expect(checkRow({ ...row, median_ns: '1' })).toBeNull();
    expect(checkRow({ ...row, ci95_ns: [1] })).toBeNull();
    expect(checkRow({ ...row, warnings: [1] })).toBeNull();
    expect(checkRow({ ...row, name: undefined })).toBeNull();
  });
});

describe('connectCode', () => {
  it('quotes the notebook name as a Python string', () => {
    const code = connectCode('a "b"\\c.ipynb');
    expect(code).toContain('connect("a \\"b\\"\\\\c.ipynb")');
  });

  it('names the old notebook after a rename', () => {
    expect(connectCode('new.ipynb', 'old.ipynb')).toContain(
      'connect("new.ipynb", renamed_from="old.ipynb")'
    );
  });

  it('loads no magic', () => {
    expect(connectCode('nb.ipynb')).not.toMatch(/load_ext|extension|get_ipython/);
  });
});

describe('untimedReason', () => {
  it('times ordinary code and gpuprofile cells', () => {
    expect(untimedReason('c = a @ a')).toBeNull();
    expect(untimedReason('%%gpuprofile --name x\nc = a @ a')).toBeNull();
    expect(untimedReason('import torch\nc = torch.ones(3) * 2')).toBeNull();
  });
  it('refuses empty cells, other cell magics and cells that only import', () => {
    expect(untimedReason('  \n')).toMatch(/empty/);
    expect(untimedReason('%%ptx --arch sm_90\n__global__ void k() {}')).toMatch(
      /%%ptx cell runs its magic.*compiles/
    );
    expect(untimedReason('%%time\nx = 1')).toMatch(/%%time cell/);
    expect(untimedReason('import torch\nfrom math import pi  # c\n\n%load_ext perflab')).toMatch(
      /only imports/
    );
  });
});

