// Show the coarsest level with at least one bin per pixel of the visible range (the finest
// when none has): the job overview refines as it zooms. args: images, bins (finest first),
// span (ms), xr (the x range), fig.
const visible = Math.max(xr.end - xr.start, 1e-9) / span;
const pixels = Math.max(fig.inner_width || 800, 1);
let pick = 0;
for (let k = bins.length - 1; k >= 0; k--) {
  if (bins[k] * visible >= pixels) { pick = k; break; }
}
images.forEach((image, k) => { image.visible = k === pick; });
