/**
 * CUDA C++ for CodeMirror: the C++ mode of @codemirror/legacy-modes with CUDA's execution
 * space and memory qualifiers as keywords and its built-in variables and intrinsics as
 * builtins. No JupyterLab imports: the tests run it on plain strings.
 */
import type { StreamParser, StringStream } from '@codemirror/language';
import { cpp } from '@codemirror/legacy-modes/mode/clike';

export const CUDA_KEYWORDS = new Set([
  '__global__',
  '__device__',
  '__host__',
  '__shared__',
  '__constant__',
  '__managed__',
  '__restrict__',
  '__forceinline__',
  '__noinline__',
  '__launch_bounds__',
  '__grid_constant__',
  '__cluster_dims__'
]);

export const CUDA_BUILTINS = new Set([
  'threadIdx',
  'blockIdx',
  'blockDim',
  'gridDim',
  'warpSize',
  '__syncthreads',
  '__syncwarp',
  '__shfl_sync',
  '__shfl_down_sync',
  '__shfl_xor_sync',
  '__ldg',
  'atomicAdd'
]);

type State = unknown;
const base = cpp as StreamParser<State>;

/** The token style CUDA gives a word that C++ styled as ``style``. */
export function cudaStyle(word: string, style: string | null): string | null {
  if (CUDA_KEYWORDS.has(word)) {
    return 'keyword';
  }
  if (CUDA_BUILTINS.has(word)) {
    return 'builtin';
  }
  return style;
}

export const cuda: StreamParser<State> = {
  ...base,
  name: 'cuda',
  token(stream: StringStream, state: State): string | null {
    const style = base.token(stream, state);
    return cudaStyle(stream.current(), style);
  }
};
