"""Numbers for people: escaping, finite values and medians of samples, fmt and fmt_pct (ns..s,
B..GiB, %, SI prefixes), SVG coordinates and anchor slugs. Every number in the page goes through
these, with fixed precision, so the same input gives the same bytes."""

from __future__ import annotations

import html
import math
import re
import statistics


# ---------------------------------------------------------------------------------------------
# Formatting: every number in the page goes through these (fixed precision, so fixed bytes).

TIME_SCALES = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
BYTE_SCALES = (("GiB", 2.0 ** 30), ("MiB", 2.0 ** 20), ("KiB", 2.0 ** 10))
SI_SCALES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
# Units written with an SI prefix glued on (374.8 GFLOP/s); other rates print as 1.6k/s.
SI_UNITS = ("FLOP/s", "FLOP", "bytes/s", "B/s")


def _e(s) -> str:
    """Escapes text and attribute values (quotes included)."""
    return html.escape("" if s is None else str(s), quote=True)


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _num(x):
    """A finite float or None (JSON null, NaN from to_dict(), strings)."""
    return float(x) if _finite(x) else None


def _g(x: float, digits: int = 4) -> str:
    """`digits` significant digits, never an exponent for numbers people read."""
    if x != 0 and abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    s = f"{x:.{digits}g}"
    if "e" in s:
        s = f"{x:.{digits + 2}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "-0.0") else s


def _scale(vmax: float, unit: str) -> tuple[float, str]:
    """(divisor, suffix) that shows values up to vmax in `unit` readably."""
    a = abs(vmax)
    if unit == "s":
        for name, s in TIME_SCALES:
            if a >= s:
                return s, " " + name
        return 1e-9, " ns"
    if unit == "bytes":
        for name, s in BYTE_SCALES:
            if a >= s:
                return s, " " + name
        return 1.0, " B"
    if unit == "fraction":
        return 0.01, "%"
    for p, s in SI_SCALES:
        if a >= s:
            if unit in SI_UNITS:
                return s, f" {p}{unit}"
            return s, p + ("/s" if unit.endswith("/s") else "")
    if unit in SI_UNITS:
        return 1.0, " " + unit
    return 1.0, "/s" if unit.endswith("/s") else ""


def fmt(v, unit: str = "", digits: int = 4) -> str:
    """A value for people: ns..s, B..GiB, %, SI prefixes for FLOP/s; '-' when missing."""
    x = _num(v)
    if x is None:
        return "-"
    if unit == "fraction":
        p = x * 100
        return f"{p:.1f}%" if abs(p) >= 10 else f"{_g(p, 3)}%"
    if unit not in ("s", "bytes") and unit not in SI_UNITS and abs(x) < 1e4:
        return _g(x, digits) + ("/s" if unit.endswith("/s") else "")
    s, suffix = _scale(x, unit)
    return _g(x / s, digits) + suffix


def fmt_pct(ratio, digits: int = 1) -> str:
    r = _num(ratio)
    if r is None:
        return "-"
    p = (r - 1) * 100
    s = f"{p:+.{digits}f}%"
    return s.replace("-0.0%", "+0.0%") if s.startswith("-0.0") and digits == 1 else s


def _c(x: float) -> str:
    """An SVG coordinate: one decimal, no negative zero."""
    s = f"{x:.1f}"
    return "0.0" if s == "-0.0" else s


def _slug(s: str, used: set) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()[:60] or "x"
    slug, i = base, 2
    while slug in used:
        slug, i = f"{base}-{i}", i + 1
    used.add(slug)
    return slug


def _median(xs) -> float | None:
    v = [float(x) for x in xs if _finite(x)]
    return statistics.median(v) if v else None


def _med(b, metric):
    return _median(b.samples.get(metric, []))
