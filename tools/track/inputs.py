"""What the tracker reads, and the one error it raises when it cannot: InputError (exit 2).

Every reader (gbjson: Google Benchmark JSON and the history store's runs; config: the TOML
file; the report's documents; the command line's numbers, regular expressions and output
paths) raises InputError naming the file, the row (a benchmark's name and its index in
`benchmarks`, a config rule) and the field, so that cli.main prints one line,

    tbd_track: <file>: row <name> (benchmarks[<i>]): field <f>: <what was wrong>

and exits 2. A gate never passes on data it could not read: a reader refuses what it cannot
use instead of dropping it. Standard library only (the peer runner imports track.files and
track.names without scipy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re

# Largest magnitude a number read may have: the median of two such values, their ratio's
# logarithm and a sum over a few files stay finite (1e308 + 1e308 overflows to inf).
MAX_MAGNITUDE = 1e300


class InputError(Exception):
    """Input the tracker cannot read or use: exit 2. `file`, `row` (already worded: "row
    <name> (benchmarks[3])", "rule 2") and `field` say where; `what` says what was wrong."""

    def __init__(self, what: str, file: str | None = None, row: str | None = None,
                 field: str | None = None):
        super().__init__(what)
        self.what, self.file, self.row, self.field = what, file, row, field

    def __str__(self) -> str:
        parts = [str(self.file)] if self.file else []
        if self.row:
            parts.append(self.row)
        if self.field:
            parts.append(f"field {self.field}")
        parts.append(self.what)
        return ": ".join(parts)


class NotBenchmarkJSON(InputError):
    """Well-formed JSON that is not a Google Benchmark file (a comparison, a peer's summary):
    a folder of runs skips it with a warning; named alone it is an error."""


def row_label(index: int, name=None) -> str:
    """How a reader names a row of `benchmarks`: by its name and its index (jq's notation);
    by its index alone where the name would not print on one line."""
    if isinstance(name, str) and name and name.isprintable():
        return f"row {name} (benchmarks[{index}])"
    return f"row benchmarks[{index}]"


def read_text(path: str) -> str:
    """A file's text: UTF-8, no NUL bytes (a binary file is not JSON or TOML)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(e.strerror or str(e), file=path) from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(f"a binary file (a NUL byte at offset {nul}), not text", file=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
                         file=path) from None


def parse_json(text: str, path: str, expected: str):
    """json.loads with every way it can fail as an InputError (Google Benchmark writes bare
    NaN and Infinity; Python's json reads them, the readers then refuse them where they
    matter)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON ({e.msg} at line {e.lineno}); expected {expected}",
                         file=path) from None
    except RecursionError:
        raise InputError(f"not JSON this reader can take (nested too deeply); expected "
                         f"{expected}", file=path) from None
    except ValueError as e:  # an integer of more digits than int() takes (4300)
        raise InputError(f"not JSON this reader can take ({e}); expected {expected}",
                         file=path) from None


def read_json(path: str, expected: str):
    doc = parse_json(read_text(path), path, expected)
    try:
        _check_strings(doc, path, "")
    except RecursionError:  # json.loads took it a few levels short of the limit
        raise InputError(f"not JSON this reader can take (nested too deeply); expected "
                         f"{expected}", path) from None
    return doc


def _check_strings(v, path: str, where: str) -> None:
    """JSON's \\ud800 escapes give Python strings with lone surrogates, which no UTF-8 output
    (a terminal, a report file) can hold: refused here rather than when printed."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(f"a lone UTF-16 surrogate (\\u{ord(v[e.start]):04x}), not text",
                             path, field=where or "(the document)") from None
    elif isinstance(v, dict):
        for k, x in v.items():
            _check_strings(k, path, f"{where}.{k!r}" if where else repr(k))
            _check_strings(x, path, f"{where}.{k}" if where else k)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _check_strings(x, path, f"{where}[{i}]")


def is_number(v) -> bool:
    """A JSON or TOML number (not a boolean: Python's True is an int)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite_number(v, *, file: str | None = None, row: str | None = None, field: str,
                  minimum: float | None = None, positive: bool = False) -> float:
    """v as a float, refusing null, non-numbers, NaN, infinities, magnitudes beyond
    MAX_MAGNITUDE and values below `minimum` (or not above 0 when `positive`)."""
    if not is_number(v):
        got = "null" if v is None else repr(v)
        raise InputError(f"expected a number, got {got}", file, row, field)
    try:
        x = float(v)
    except OverflowError:  # an integer beyond a float's range
        raise InputError("a number beyond a float's range", file, row, field) from None
    if not math.isfinite(x):
        raise InputError(f"expected a finite number, got {x}", file, row, field)
    if abs(x) > MAX_MAGNITUDE:
        raise InputError(f"{x:g} is out of range (magnitudes up to {MAX_MAGNITUDE:g})",
                         file, row, field)
    if positive and not x > 0:
        raise InputError(f"must be positive, got {x:g}", file, row, field)
    if minimum is not None and x < minimum:
        raise InputError(f"must be >= {minimum:g}, got {x:g}", file, row, field)
    return x


def compile_regex(v, *, file: str | None = None, row: str | None = None,
                  field: str) -> re.Pattern:
    if not isinstance(v, str):
        raise InputError(f"expected a regular expression string, got {v!r}", file, row, field)
    try:
        return re.compile(v)
    except (re.error, RecursionError, OverflowError) as e:
        raise InputError(f"{v!r} is not a regex ({e})", file, row, field) from None


# ---- the command line: argparse types, so a bad value is argparse's exit 2 naming the flag

def arg_number(kind=float, *, low: float | None = None, high: float | None = None,
               open_low: bool = False, open_high: bool = False):
    """An argparse type: a finite number (a whole one for kind=int) in [low, high], with open
    ends where asked; NaN and the infinities never pass (float('nan') parses, and every
    comparison with it is false: a threshold of NaN would pass any slowdown)."""
    limits = []
    if low is not None:
        limits.append(f"{'>' if open_low else '>='} {low:g}")
    if high is not None:
        limits.append(f"{'<' if open_high else '<='} {high:g}")
    want = ("a whole number" if kind is int else "a finite number") + \
        (" " + " and ".join(limits) if limits else "")

    def parse(s: str):
        try:
            x = kind(s)
        except (ValueError, OverflowError):
            x = None
        ok = x is not None and math.isfinite(x) and not (
            low is not None and (x <= low if open_low else x < low)) and not (
            high is not None and (x >= high if open_high else x > high))
        if not ok:
            raise argparse.ArgumentTypeError(f"expected {want}, got {s!r}")
        return x
    return parse


def arg_regex(s: str) -> str:
    """An argparse type: a Python regular expression (kept as the string)."""
    try:
        re.compile(s)
    except (re.error, RecursionError, OverflowError) as e:
        raise argparse.ArgumentTypeError(f"{s!r} is not a regex ({e})") from None
    return s


def _nearest_existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def arg_output_file(s: str) -> str:
    """An argparse type: a file the tracker can write (its folder made if need be), checked
    before any work is done; writing it can still fail (a full disk), which is exit 2 too."""
    if not s:
        raise argparse.ArgumentTypeError("an empty path")
    if os.path.isdir(s):
        raise argparse.ArgumentTypeError(f"{s}: is a folder, not a file")
    _check_folder(os.path.dirname(os.path.abspath(s)), s)
    return s


def arg_output_dir(s: str) -> str:
    """An argparse type: a folder the tracker can write into (made if need be)."""
    if not s:
        raise argparse.ArgumentTypeError("an empty path")
    _check_folder(os.path.abspath(s), s)
    return s


def _check_folder(folder: str, given: str) -> None:
    near = _nearest_existing(folder)
    if not os.path.isdir(near):
        raise argparse.ArgumentTypeError(f"{given}: {near} is not a folder")
    if not os.access(near, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{given}: {near} is not writable")


# ---- documents the tracker wrote and reads back (report's --comparison, --history,
# --frameworks): their shape, declared once (report/documents.py) and checked here

class Shape:
    """A declared JSON shape. NUMBER: a finite number or null (the tracker writes NaN as
    null); SCALAR: text, a number, a boolean or null; ANY: not checked; Opt(s): null or s;
    List(s); Map(s): an object of any keys; Obj(fields, required, rest): an object whose
    listed fields have their shapes, `required` present, other keys of shape `rest`."""


class _Leaf(Shape):
    def __init__(self, name: str):
        self.name = name


NUMBER, SCALAR, ANY = _Leaf("a number or null"), _Leaf("text, a number or null"), _Leaf("any")


class Opt(Shape):
    def __init__(self, shape):
        self.shape = shape


class List(Shape):
    def __init__(self, item):
        self.item = item


class Map(Shape):
    def __init__(self, value):
        self.value = value


class Obj(Shape):
    def __init__(self, fields: dict, required: tuple = (), rest=None):
        self.fields, self.required, self.rest = fields, required, rest or ANY


_NAMES = {str: "text", bool: "true or false", int: "a whole number"}


def check_shape(v, shape, path: str, where: str = "") -> None:
    """InputError naming the file and the field (`rows[3].metrics[0].ratio`) where v is not
    of the declared shape."""
    def fail(what):
        raise InputError(f"expected {what}, got {'null' if v is None else repr(v)[:60]}", path,
                         field=where or "(the document)")
    if shape is ANY:
        return
    if isinstance(shape, Opt):
        if v is not None:
            check_shape(v, shape.shape, path, where)
        return
    if shape is NUMBER:
        if v is not None and not (is_number(v) and _finite_float(v)):
            fail(f"a finite number (magnitude up to {MAX_MAGNITUDE:g}) or null")
    elif shape is SCALAR:
        if v is not None and not isinstance(v, str) and not (is_number(v) and
                                                              _finite_float(v)):
            fail(shape.name)
    elif shape in (str, bool):
        if not isinstance(v, shape):
            fail(_NAMES[shape])
    elif shape is int:
        if not is_number(v) or not isinstance(v, int) or abs(v) > 2 ** 53:
            fail(_NAMES[int])
    elif isinstance(shape, List):
        if not isinstance(v, list):
            fail("a list")
        for i, x in enumerate(v):
            check_shape(x, shape.item, path, f"{where}[{i}]")
    elif isinstance(shape, Map):
        if not isinstance(v, dict):
            fail("an object")
        for k, x in v.items():
            check_shape(x, shape.value, path, f"{where}.{k}" if where else k)
    elif isinstance(shape, Obj):
        if not isinstance(v, dict):
            fail("an object")
        for k in shape.required:
            if k not in v:
                raise InputError("missing", path, field=f"{where}.{k}" if where else k)
        for k, x in v.items():
            check_shape(x, shape.fields.get(k, shape.rest), path,
                        f"{where}.{k}" if where else k)
    else:
        raise TypeError(f"not a shape: {shape!r}")


def _finite_float(v) -> bool:
    try:
        x = float(v)
    except OverflowError:
        return False
    return math.isfinite(x) and abs(x) <= MAX_MAGNITUDE
