"""Human-readable units, shared by every text and HTML view."""

from __future__ import annotations

import math

_TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
_SIZE_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
# SI prefixes of a rate, largest first; the last, no prefix, takes everything below 1000
_RATE_PREFIXES = (
    (1e18, "E"),
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
)


def format_ns(ns: float, digits: int = 3) -> str:
    """``1234.5`` -> ``'1.23 us'``; picks the largest unit that keeps the value >= 1, and
    the next one where the value rounds to 1000 of it (999.7 ns is "1 us"). The JupyterLab
    panel's ``formatNs`` writes the same: tests/data/format_ns_cases.json holds the cases
    both are tested against."""
    if ns is None or not math.isfinite(ns):
        return "n/a"
    return _in_unit(ns, _TIME_UNITS, digits) or f"{ns:.{digits}g} ns"


def _in_unit(value: float, units: tuple[tuple[float, str], ...], digits: int) -> str | None:
    """``value`` in the largest of ``units`` (largest first) that keeps it >= 1, or in the
    next larger one where it rounds to 1000 of that unit ('.3g' would write "1e+03");
    None below the smallest unit."""
    for i, (scale, unit) in enumerate(units):
        if abs(value) >= scale:
            text = f"{value / scale:.{digits}g}"
            if abs(float(text)) >= 1000 and i > 0:
                scale, unit = units[i - 1]
                text = f"{value / scale:.{digits}g}"
            return f"{text} {unit}"
    return None


def us_from_ns(ns: float) -> float:
    """Nanoseconds as microseconds to the nanosecond, for reports: medians, percentiles and
    means fall between whole nanoseconds, and their binary remainders (69.55250000000001)
    are noise. NaN stays NaN."""
    return round(ns / 1000.0, 3)


def format_us(us: float) -> str:
    """Microseconds, as :func:`format_ns` shows times (traces and summaries keep us)."""
    return format_ns(us * 1e3)


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless n is 1: "1 track", "12 tracks"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def shorten(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters, the last one "…" where it was longer."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def format_rate(per_s: float, unit: str = "B/s", digits: int = 3) -> str:
    """A rate per second with an SI prefix, never an exponent: ``1.005e13`` -> ``'10.1 TB/s'``,
    ``(2.5e14, "FLOP/s")`` -> ``'250 TFLOP/s'``. A value that rounds to 1000 of its prefix
    is written in the next one (999.7 GB/s is "1 TB/s"); below 1 and beyond the largest
    prefix the number is written in plain decimals (``'0.00012 B/s'``, ``'1230 EB/s'``)."""
    if per_s is None or not math.isfinite(per_s):
        return "n/a"
    for i, (scale, prefix) in enumerate(_RATE_PREFIXES):
        if abs(per_s) >= scale or scale == 1.0:
            if i > 0 and abs(float(f"{per_s / scale:.{digits}g}")) >= 1000:
                scale, prefix = _RATE_PREFIXES[i - 1]
            return f"{plain_number(per_s / scale, digits)} {prefix}{unit}"
    raise AssertionError("unreachable: the last prefix takes every value")


def plain_number(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, in plain decimals where ``'.3g'`` would
    write an exponent: ``1.2e-05`` -> ``'0.000012'``, ``123456`` -> ``'123456'``."""
    text = f"{value:.{digits}g}"
    if "e" not in text or not math.isfinite(value):
        return text
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if decimals else text


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``, 3 significant digits (whole bytes below 1 KiB); 1000 KiB
    and more is written in MiB (``'0.977 MiB'``), never with an exponent."""
    return _in_unit(n, _SIZE_UNITS, 3) or f"{int(n)} B"


def parse_size(text: str) -> int:
    """``'4K'`` -> 4096, ``'1M'`` -> 1048576, ``'2GB'`` -> 2 GiB, ``'512'`` -> 512."""
    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = 1
    for suffix, mult in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if value.endswith(suffix):
            value, scale = value[:-1], mult
            break
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (use e.g. 512, 4K, 1M, 2G)") from None
    if number < 0 or not math.isfinite(number):
        raise ValueError(f"not a size: {text!r}")
    return int(number * scale)
