"""lib/format.js's text for the values the browser tests read, written again in Python so that a
test states what the page must show without asking the page."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def fmt_us(us: float) -> str:
    """formatUs, for values of at least 1 us."""
    def sig3(v: float) -> str:
        return str(round(v)) if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    if us < 1000:
        return f"{us:.1f} us" if us < 10 else f"{round(us)} us"
    return f"{sig3(us / 1e3)} ms" if us < 1e6 else f"{sig3(us / 1e6)} s"


def fmt_bytes(n: float) -> str:
    """formatBytes: 1024-based, two decimals above bytes, halves rounded up as toFixed does."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    value, i = float(n), 0
    while abs(value) >= 1024 and i < len(units) - 1:
        value /= 1024
        i += 1
    if i == 0:
        return f"{round(value)} B"
    return f"{Decimal(value).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)} {units[i]}"


def fmt_count(n: float) -> str:
    """formatCount."""
    return f"{round(n):,}"


def fmt_ratio(ratio: float) -> str:
    """formatRatio."""
    return f"{ratio * 100:.2f} %"
