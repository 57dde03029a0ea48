import { StringStream } from '@codemirror/language';
import { describe, expect, it } from 'vitest';

import { cuda, cudaStyle } from '../src/cuda';

/** The (token, style) pairs the CUDA mode gives each line of ``text``. */
function tokens(text: string): [string, string | null][] {
  const state = cuda.startState!(2);
  const out: [string, string | null][] = [];
  for (const line of text.split('\n')) {
    const stream = new StringStream(line, 2, 2);
    while (!stream.eol()) {
      const style = cuda.token(stream, state);
      if (stream.current().trim()) {
        out.push([stream.current(), style]);
      }
      stream.start = stream.pos;
    }
  }
  return out;
}

describe('the CUDA mode', () => {
  const source = [
    '__global__ void copy(const float* __restrict__ in, float* out, int n) {',
    '  __shared__ float tile[256];',
    '  int i = blockIdx.x * blockDim.x + threadIdx.x;  // index',
    '  if (i < n) out[i] = in[i];',
    '}'
  ].join('\n');
  const styles = new Map(tokens(source));

  it('makes CUDA qualifiers keywords', () => {
    expect(styles.get('__global__')).toBe('keyword');
    expect(styles.get('__restrict__')).toBe('keyword');
    expect(styles.get('__shared__')).toBe('keyword');
  });

  it('makes built-in variables builtins and keeps C++ as C++', () => {
    expect(styles.get('blockIdx')).toBe('builtin');
    expect(styles.get('threadIdx')).toBe('builtin');
    expect(styles.get('if')).toBe('keyword');
    expect(styles.get('void')).toBe('type');
    expect(styles.get('// index')).toBe('comment');
    expect(styles.get('256')).toBe('number');
  });

  it('leaves other words as C++ styled them', () => {
    expect(cudaStyle('tile', 'variable')).toBe('variable');
    expect(cudaStyle('__device__', 'builtin')).toBe('keyword');
  });
});
