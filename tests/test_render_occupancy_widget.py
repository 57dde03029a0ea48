"""The %%ptx occupancy slider: moving it recomputes the occupancy from the kernel's own
registers and shared memory (real compilation, no GPU)."""

from __future__ import annotations

import pytest
from test_ptx_magic import COPY

pytest.importorskip("ipywidgets")

from perflab.analysis.occupancy import kernel_occupancy
from perflab.capture.compile import compile_cuda
from perflab.render.ptx_view import CompileView, ViewOptions

# 48 KiB of static shared memory per block: at most 4 blocks fit in H100's 228 KiB
SHARED = """__global__ void stage(float* x) {
  __shared__ float tile[12288];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
}
"""


def test_slider_recomputes_occupancy_for_the_chosen_block_size() -> None:
    result = compile_cuda(SHARED, arch="sm_90a")
    title, slider, shown = (
        CompileView(result, ViewOptions(block_size=256)).occupancy_slider().children
    )
    assert "stage" in title.value and slider.value == 256 and slider.step == 32
    kernel = result.kernels[0]
    for block in (64, 256, 1024):
        slider.value = block
        expected = kernel_occupancy(kernel, block).summary()
        assert expected in shown.value.replace("&#x27;", "'")
    slider.value = 64  # small blocks: shared memory, not warps, caps the blocks per SM
    assert "limited by shared memory" in kernel_occupancy(kernel, 64).summary()
    assert "limits" in shown.value


def test_slider_of_a_result_without_kernels_is_an_input_error() -> None:
    from perflab.errors import InputError
    from perflab.render.occupancy_widget import occupancy_slider

    result = compile_cuda(COPY, arch="sm_90a")
    result.kernels = []
    with pytest.raises(InputError, match="needs a kernel"):
        occupancy_slider(result)
