"""Human-readable units, shared by every text and HTML view."""

from __future__ import annotations

import math

_TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
_SIZE_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


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
