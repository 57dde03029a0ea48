"""A block-size slider that shows a compiled kernel's occupancy as it moves (ipywidgets).

``CompileView.occupancy_slider()`` (or :func:`occupancy_slider`) in a running kernel: drag
the block size and see how many blocks and warps fit on an SM, and which resource limits
them (registers, shared memory, warps, blocks). The numbers come from the kernel's own
registers and shared memory (:func:`perflab.analysis.occupancy.kernel_occupancy`); nothing
runs on a GPU.
"""

from __future__ import annotations

from typing import Any

from perflab.analysis.occupancy import Occupancy, kernel_occupancy
from perflab.errors import InputError, import_extra
from perflab.model.kernel import CompileResult, KernelArtifacts
from perflab.render.html import esc, table, wrap

WARP = 32
MAX_BLOCK = 1024


def occupancy_html(kernel: KernelArtifacts, block: int, dynamic_shared: int | None) -> str:
    """The occupancy of ``kernel`` at ``block`` threads: a sentence, a bar and the blocks per
    SM each resource allows."""
    try:
        occ: Occupancy = kernel_occupancy(kernel, block, dynamic_shared)
    except InputError as exc:
        return wrap(f'<div class="warn">{esc(exc)}</div>')
    width = round(200 * occ.occupancy)
    bar = (
        '<span style="display: inline-block; width: 200px; height: 10px; '
        'background-color: #e5e5e5"><span style="display: inline-block; height: 10px; '
        f'width: {width}px; background-color: #4c78a8"></span></span>'
    )
    rows = [
        [factor, str(blocks), "limits" if factor in occ.limiting else ""]
        for factor, blocks in occ.limits.items()
    ]
    limits = table(["resource", "blocks per SM it allows", ""], rows)
    return wrap(f"<div>{bar} {esc(occ.summary())}</div>{limits}")


def occupancy_slider(
    result: CompileResult, kernel: str | None = None, *, dynamic_shared: int | None = None
) -> Any:  # an ipywidgets VBox (ipywidgets has no types)
    """A slider over block sizes (one warp a step, up to 1024 threads) above the occupancy
    of ``kernel`` (default: the first) at the chosen size."""
    widgets = import_extra("ipywidgets", "the occupancy slider")
    if not result.kernels:
        raise InputError("the occupancy slider needs a kernel: this result has none")
    chosen = result.kernel(kernel) if kernel else result.kernels[0]
    from perflab.analysis.kernel_report import resolve_block_size

    start = min(max(WARP, resolve_block_size(result)), MAX_BLOCK)
    slider = widgets.IntSlider(
        value=start - start % WARP,
        min=WARP,
        max=MAX_BLOCK,
        step=WARP,
        description="block size",
        continuous_update=True,
    )
    shown = widgets.HTML(value=occupancy_html(chosen, slider.value, dynamic_shared))

    def update(_change: object) -> None:  # the slider's value is already the new one
        shown.value = occupancy_html(chosen, int(slider.value), dynamic_shared)

    slider.observe(update, names="value")
    title = widgets.HTML(value=wrap(f"<b>{esc(chosen.name)}</b> [{esc(chosen.arch)}]"))
    return widgets.VBox([title, slider, shown])
