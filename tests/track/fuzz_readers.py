#!/usr/bin/env python3
"""A fuzz target for the tracker's readers: Google Benchmark JSON (gbjson.load_run, then all
a comparison does with what it read), the TOML config (config.load_config), benchmark names
(names.parse) and the documents `report` reads (a comparison, a history document, a
frameworks summary: then the HTML page made of them).

Every input must be read, or refused with the tracker's InputError (cli.main prints it as one
line and exits 2). Any other exception is a crash; so is a name that parses but whose
canonical form does not parse back to the same parts, and an input that takes over
SLOW_SECONDS. Run alone:

    tests/track/fuzz_readers.py --seconds 600 --seed 7 [--crash-dir DIR]

With atheris importable (pip install atheris; not in Debian) and --atheris, libFuzzer drives
the same targets with coverage feedback (its own flags after `--`, e.g. -max_total_time=600).
Otherwise, and always in fuzz_test.py, a seeded mutation loop of the standard library: byte
flips, insertions of tokens (NaN, -1, null, 1e999, a NUL, bytes that are not UTF-8),
deletions, duplications, truncation, splicing of two corpus files, and for JSON mutations of
the document (a number replaced by NaN, -1, null, a huge value or text, a key deleted or
renamed, a list emptied or an entry doubled, a control character or a lone surrogate in a
name), for TOML of its lines (a value replaced by nan, inf, a date-time, a bad regex). The
seeds are fuzz_corpus/ (a tbd file with aggregates, an error row and a breakdown; a config
with every key; names of every family), tests/track/data/*.json and tools/track/example.toml,
and for the report a comparison and a frameworks summary made from those runs at start; inputs
that are read go back into the pool, so mutations build on inputs that pass the checks.
The same seed gives the same inputs (how many depends on the machine's speed).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import io
import json
import math
import os
import random
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

from track import compare as cmp  # noqa: E402
from track import dist_sim, history, names, render, report  # noqa: E402
from track import frameworks as fw  # noqa: E402
from track.cli import to_json  # noqa: E402
from track.config import load_config  # noqa: E402
from track.gbjson import load_run  # noqa: E402
from track.inputs import InputError  # noqa: E402

CORPUS = os.path.join(HERE, "fuzz_corpus")
DATA = os.path.join(HERE, "data")
EXAMPLE_TOML = os.path.join(TOOLS, "track", "example.toml")
TODAY = datetime.date(2026, 12, 6)  # acknowledgements expire against a fixed day
SLOW_SECONDS = 5.0                  # one input taking longer is reported as a crash
MAX_INPUT = 256 * 1024              # mutations that grow an input beyond this are cut
POOL = 64                           # inputs kept per target (seeds and read mutants)
SHARE = (("json", 0.5), ("toml", 0.15), ("names", 0.2), ("report", 0.15))


# ---- the targets: read, then use what was read as the command line would

class Targets:
    def __init__(self, tmp: str):
        self.tmp = tmp
        self.seed_runs = []
        for p in json_seeds():
            try:
                self.seed_runs.append(load_run(p))
            except InputError:
                pass  # a history document: a seed for the refusals, not a base
        self.default_cfg = load_config(None)
        self.sample_names = name_seeds()

    def _read(self, data: bytes, file: str, reader):
        """reader(path) of the input written to a file; None where it was refused."""
        path = os.path.join(self.tmp, file)
        with open(path, "wb") as f:
            f.write(data)
        try:
            return reader(path)
        except InputError as e:
            _refusal(e)
            return None

    def json(self, data: bytes, rng: random.Random) -> bool:
        run = self._read(data, "fuzz.json", load_run)
        if run is None:
            return False
        base = rng.choice(self.seed_runs)
        pair = ([base], [run]) if rng.random() < 0.5 else ([run], [base])
        try:
            _use_runs(*pair, self.default_cfg)
            history.fingerprint(run.context)
            if run.dist_steps:
                _simulate([run])
        except InputError as e:  # the subcommands' own refusals (e.g. too few rows to fit)
            _refusal(e)
        return True

    def toml(self, data: bytes, rng: random.Random) -> bool:
        cfg = self._read(data, "fuzz.toml", load_config)
        if cfg is None:
            return False
        for name in self.sample_names[:8]:
            for metric in ("real_time", "peak_memory_bytes", "mem_workspace", "error"):
                cfg.settings(name, metric)
                cfg.acknowledgement(name, metric, TODAY)
        runs = [r for r in self.seed_runs if not r.context.get("framework")]
        _use_runs([runs[0]], [rng.choice(runs)], cfg)
        return True

    def report(self, data: bytes, rng: random.Random) -> bool:
        """The page `report --comparison/--history/--frameworks FILE --runs ...` writes."""
        docs = {kind: self._read(data, "fuzz-report.json", load) for kind, load in (
            ("comparison", report.load_comparison), ("history", report.load_history),
            ("frameworks", report.load_frameworks))}
        if not any(docs.values()):
            return False
        runs = rng.sample(self.seed_runs, rng.randrange(len(self.seed_runs) + 1))
        report.build_html(docs["comparison"], docs["history"], runs, "fuzz",
                          docs["frameworks"]).encode("utf-8")
        return True

    def names(self, data: bytes, rng: random.Random) -> bool:
        s = data.decode("utf-8", errors="surrogateescape")
        n = names.parse(s)
        names.strip_gbench(s)
        cmp.family_of(s)
        if n is None:
            return False
        canon = n.str()
        back = names.parse(canon)
        if back is None or back.str() != canon or _parts(back) != _parts(n):
            raise AssertionError(f"names.parse({s!r}) gives {canon!r}, which parses back as "
                                 f"{None if back is None else _parts(back)}")
        if not canon.isascii():
            raise AssertionError(f"names.parse({s!r}): a canonical name that is not ASCII: "
                                 f"{canon!r}")
        return True


def _parts(n):
    return (n.family, n.kind, n.subject, n.phase, n.batch, list(n.params))


def _refusal(e: InputError) -> None:
    str(e).encode("utf-8")  # the message itself must print


def _use_runs(base, new, cfg) -> None:
    """What compare (or the frameworks table) does with two sides, every output rendered and
    encoded as it would be written."""
    if fw.is_frameworks_comparison(base, new):
        s = fw.summarize(fw.group_sides(base + new))
        outs = [fw.text(s), fw.markdown(s), to_json(s)]
    else:
        c = cmp.compare(base, new, cfg, today=TODAY)
        if c.exit_code not in (0, 1, 3):
            raise AssertionError(f"compare's exit code {c.exit_code}")
        outs = [render.text(c, show_all=True), render.markdown(c), to_json(c.to_dict())]
    for o in outs:
        o.encode("utf-8")


def _simulate(runs) -> None:
    profs = dist_sim.profiles(runs)
    dist_sim.validate(runs, profs, "ring", 25.0, 1.0)
    for p in profs:
        if p.ranks == 1:
            for algo in dist_sim.ALGORITHMS:
                dist_sim.simulate(p, 8, dist_sim.LINKS["10GbE"], algo, 25.0, 1.0, 1.0)


# ---- seeds

def json_seeds() -> list[str]:
    return sorted(glob.glob(os.path.join(CORPUS, "*.json")) +
                  glob.glob(os.path.join(DATA, "*.json")))


def toml_seeds() -> list[str]:
    return sorted(glob.glob(os.path.join(CORPUS, "*.toml"))) + [EXAMPLE_TOML]


def name_seeds() -> list[str]:
    with open(os.path.join(CORPUS, "names.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def report_seeds(targets: Targets) -> list[bytes]:
    """A comparison and a frameworks summary of the seed runs (as compare --format json and
    peer write them), and every history document among the JSON seeds."""
    tbd = [r for r in targets.seed_runs if not r.context.get("framework")]
    peers = [r for r in targets.seed_runs if r.context.get("framework")]
    c = cmp.compare(tbd[:1], tbd[1:2] or tbd[:1], targets.default_cfg, today=TODAY)
    out = [to_json(c.to_dict()).encode("utf-8")]
    if peers:
        out.append(to_json(fw.summarize(fw.group_sides(tbd[:1] + peers))).encode("utf-8"))
    for p in json_seeds():
        try:
            report.load_history(p)
        except InputError:
            continue
        with open(p, "rb") as f:
            out.append(f.read())
    return out


def seed_inputs(targets: Targets) -> dict[str, list[bytes]]:
    def read(p):
        with open(p, "rb") as f:
            return f.read()
    return {"json": [read(p) for p in json_seeds()], "toml": [read(p) for p in toml_seeds()],
            "names": [n.encode("utf-8") for n in name_seeds()], "report": report_seeds(targets)}


# ---- mutations

BYTE_TOKENS = [b"NaN", b"-Infinity", b"Infinity", b"null", b"-1", b"0", b"1e999", b"-1e308",
               b"9" * 400, b"9" * 5000, b'""', b"[]", b"{}", b"true", b"\x00", b"\xff", b"\xc3",
               b"\xed\xa0\x80", b'"\\ud800"', b"\\n", b"[" * 3000, b",", b":", b"\"", b"}",
               b"]", b"=", b"\n", b"nan", b"inf", b"-0", b"\xef\xbb\xbf"]
# Values a JSON field can be replaced by.
JSON_VALUES = [math.nan, math.inf, -math.inf, -1, 0, -0.0, None, 1e308, -1e308, 1e-320,
               10 ** 400, 2 ** 63, "", "NaN", "x", True, False, [], {}, [1], {"a": 1},
               "²", "٣", "a\nb", "\ud800", "unknown", "../../x", "us", "ns", "s", "min",
               "aggregate", "iteration", "median", "mean", "cv", "stddev", "framework"]
# What a string can be given (at its end, or in place of a character).
TEXT_BITS = ["\n", "\x00", "\x7f", "\u202e", "²", "٣", "/", ":", "_mean", "_median", "/",
             "/manual_time", "/batch:1", ".", " ", "\ud800", "é", "ｂ"]
TOML_VALUES = ["nan", "+nan", "-nan", "inf", "-inf", "-1", "0", "1e999", "1e300",
               "99999999999999999999", "true", '"x"', '"("', '"[a-"', "[]", "{}", '["a", 1]',
               "[1, 2]", "2027-01-31T00:00:00", "2027-01-31T00:00:00Z", "07:32:00",
               "1979-05-27", '"2027-02-30"', '"(a+)+$"', '""', '"info"', '"sideways"',
               "[" * 2000 + "]" * 2000, '"\\uD800"', "'''x'''", "{ a = 1 }"]
TOML_LINES = ["[defaults]", "[[rule]]", "[[acknowledged]]", "[rule]", "[[defaults]]",
              "[bogus]", "defaults = 1", "rule = [1]", "acknowledged = 3", "alpha = 0.5",
              "threshold = nan", "memory_tolerance = inf", "refuse = [1]", "direction = 3",
              "benchmark = 1", 'metric = "("', "reason = []", 'reason = ""', "expires = 1",
              "tolerance_bytes = -1", "bogus = 1", "[defaults.x]", "a.b.c = 1", "x = ["]
NAME_TOKENS = ["/", ":", ".", "_", "-", "batch:", "ranks:", "bytes:", "len:", "train", "fwd",
               "bwd", "dgrad", "wgrad", "step", "manual_time", "real_time", "iterations:",
               "repeats:", "threads:", "min_time:", "min_warmup_time:", "_mean", "_median",
               "_stddev", "_cv", "0", "1", "007", "999999999999", "9999999999999", "²", "٣",
               "\n", " ", "\x00", "ｂatch", "..", "A-b_c"]


def _pick_range(rng: random.Random, n: int) -> tuple[int, int]:
    a = rng.randrange(n + 1)
    return a, min(n, a + rng.choice((1, 2, 4, 8, 16, 64, 256)))


def mutate_bytes(rng: random.Random, data: bytes, pool: list[bytes],
                 tokens: list[bytes]) -> bytes:
    b = bytearray(data)
    op = rng.randrange(8)
    if op == 0 and b:                                     # flip a bit
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif op == 1 and b:                                   # a random byte
        b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == 2:                                         # insert a token
        i = rng.randrange(len(b) + 1)
        b[i:i] = rng.choice(tokens)
    elif op == 3:                                         # insert random bytes
        i = rng.randrange(len(b) + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    elif op == 4 and b:                                   # delete a range
        i, j = _pick_range(rng, len(b))
        del b[i:j]
    elif op == 5 and b:                                   # duplicate a range
        i, j = _pick_range(rng, len(b))
        k = rng.randrange(len(b) + 1)
        b[k:k] = b[i:j]
    elif op == 6 and b:                                   # truncate
        del b[rng.randrange(len(b)):]
    else:                                                 # splice with another input
        other = rng.choice(pool)
        b = b[:rng.randrange(len(b) + 1)] + other[rng.randrange(len(other) + 1):]
    return bytes(b[:MAX_INPUT])


def _slots(doc, out: list, depth: int = 0) -> None:
    """(container, key) of every value in the document."""
    if depth > 12:
        return
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) \
        if isinstance(doc, list) else ()
    for k, v in items:
        out.append((doc, k))
        if isinstance(v, (dict, list)):
            _slots(v, out, depth + 1)


def mutate_json_doc(rng: random.Random, doc) -> None:
    slots: list = []
    _slots(doc, slots)
    if not slots:
        return
    holder, key = rng.choice(slots)
    v = holder[key]
    op = rng.randrange(7)
    if op == 0 or (op == 1 and not isinstance(v, str)):   # another value, another type
        holder[key] = rng.choice(JSON_VALUES)
    elif op == 1:                                         # text: a character that breaks it
        bit = rng.choice(TEXT_BITS)
        i = rng.randrange(len(v) + 1)
        holder[key] = v[:i] + bit + v[i:] if rng.random() < 0.7 else v + bit
    elif op == 2 and isinstance(holder, dict):            # delete the key
        del holder[key]
    elif op == 2:
        holder.pop(key)
    elif op == 3 and isinstance(holder, dict):            # rename the key
        holder[rng.choice(["name", "x", "real_time", "time_unit", "", "error_occurred",
                           "run_name", "aggregate_name", "context", key + "_"])] = \
            holder.pop(key)
    elif op == 4 and isinstance(v, list):                 # empty a list, or double an entry
        if v and rng.random() < 0.6:
            v.insert(rng.randrange(len(v) + 1), json.loads(json.dumps(rng.choice(v))))
        else:
            v.clear()
    elif op == 5 and isinstance(v, (int, float)) and not isinstance(v, bool):
        x = float(v) if abs(v) < 1e300 else 1.0  # an int of 400 digits has no float
        holder[key] = rng.choice([-x, x * 1e300, x / 1e300, x * 1000, 0, x + 1, -abs(x) - 1])
    else:                                                 # swap with another value
        h2, k2 = rng.choice(slots)
        try:
            holder[key], h2[k2] = h2[k2], v
        except (KeyError, IndexError):  # the other slot went away with this one
            pass


def mutate_json(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    if rng.random() < 0.55:
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, (dict, list)):
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                mutate_json_doc(rng, doc)
            try:
                return json.dumps(doc).encode("utf-8", "surrogatepass")[:MAX_INPUT]
            except (ValueError, RecursionError):  # an int beyond str()'s 4300 digits
                pass
    return mutate_bytes(rng, data, pool, BYTE_TOKENS)


def mutate_toml(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    if rng.random() < 0.6:
        lines = data.decode("utf-8", errors="replace").split("\n")
        i = rng.randrange(len(lines))
        op = rng.randrange(4)
        if op == 0 and "=" in lines[i]:
            lines[i] = lines[i].split("=", 1)[0] + "= " + rng.choice(TOML_VALUES)
        elif op == 1:
            lines.insert(i, rng.choice(TOML_LINES))
        elif op == 2:
            del lines[i]
        else:
            lines.insert(i, lines[rng.randrange(len(lines))])
        return "\n".join(lines).encode("utf-8", "surrogatepass")[:MAX_INPUT]
    return mutate_bytes(rng, data, pool, BYTE_TOKENS + [t.encode() for t in TOML_VALUES[:12]])


def mutate_name(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    if rng.random() < 0.7:
        s = data.decode("utf-8", errors="surrogateescape")
        i = rng.randrange(len(s) + 1)
        op = rng.randrange(4)
        if op == 0:
            s = s[:i] + rng.choice(NAME_TOKENS) + s[i:]
        elif op == 1:
            j = min(len(s), i + rng.randrange(1, 6))
            s = s[:i] + s[j:]
        elif op == 2 and s:
            parts = s.split("/")
            parts[rng.randrange(len(parts))] = rng.choice(NAME_TOKENS).strip("/")
            s = "/".join(parts)
        else:
            other = rng.choice(pool).decode("utf-8", errors="surrogateescape")
            s = s[:i] + other[rng.randrange(len(other) + 1):]
        return s.encode("utf-8", errors="surrogateescape")[:4096]
    return mutate_bytes(rng, data, pool, [t.encode("utf-8") for t in NAME_TOKENS])[:4096]


MUTATORS = {"json": mutate_json, "toml": mutate_toml, "names": mutate_name,
            "report": mutate_json}


# ---- the loop

@dataclass
class Crash:
    target: str
    key: str                # exception type and the innermost frame of the tracker's code
    message: str
    trace: str
    data: bytes
    count: int = 1


@dataclass
class Result:
    seed: int
    seconds: float
    runs: dict = field(default_factory=dict)      # target -> inputs tried
    read: dict = field(default_factory=dict)      # target -> inputs read (not refused)
    crashes: dict = field(default_factory=dict)   # key -> Crash

    def summary(self) -> str:
        L = [f"fuzz_readers: seed {self.seed}, {self.seconds:.1f} s, " + ", ".join(
            f"{t} {self.runs.get(t, 0)} inputs ({self.read.get(t, 0)} read)"
            for t, _ in SHARE)]
        if not self.crashes:
            L.append("no crash: every input was read or refused with InputError")
        for c in self.crashes.values():
            L.append(f"CRASH ({c.count}x) {c.target}: {c.key}: {c.message}")
            L.append(f"  input (first {min(len(c.data), 300)} of {len(c.data)} bytes): "
                     f"{c.data[:300]!r}")
            L.append("  " + c.trace.strip().replace("\n", "\n  "))
        return "\n".join(L)


def _crash_key(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if os.sep + "track" + os.sep in f.filename or
            f.filename.endswith("fuzz_readers.py")]
    f = (mine or frames or [None])[-1]
    where = f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" if f else "?"
    first = str(e).split("\n", 1)[0][:80] if isinstance(e, AssertionError) else ""
    return _printable(f"{type(e).__name__} at {where}" + (f" ({first})" if first else ""))


def run(seconds: float, seed: int, crash_dir: str | None = None,
        stop_on_crash: bool = False) -> Result:
    rng = random.Random(seed)
    res = Result(seed=seed, seconds=0.0)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tbd_fuzz.") as tmp, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        targets = Targets(tmp)
        pools = seed_inputs(targets)
        seeds = {k: list(v) for k, v in pools.items()}
        while time.monotonic() - t0 < seconds:
            r, acc = rng.random(), 0.0
            target = SHARE[-1][0]
            for name, share in SHARE:
                acc += share
                if r < acc:
                    target = name
                    break
            pool = pools[target]
            data = rng.choice(pool)
            for _ in range(rng.choice((1, 1, 2, 3, 4))):
                data = MUTATORS[target](rng, data, pool)
            res.runs[target] = res.runs.get(target, 0) + 1
            start = time.monotonic()
            try:
                ok = getattr(targets, target)(data, rng)
                took = time.monotonic() - start
                if took > SLOW_SECONDS:
                    raise AssertionError(f"slow: {took:.1f} s for one input")
            except Exception as e:  # noqa: BLE001 (anything but InputError is the finding)
                key = _crash_key(e)
                if key in res.crashes:
                    res.crashes[key].count += 1
                else:
                    res.crashes[key] = Crash(target, key, _printable(str(e)[:300]),
                                             _printable(traceback.format_exc()), data)
                    if crash_dir:
                        _save(crash_dir, target, len(res.crashes), data)
                if stop_on_crash:
                    break
                continue
            if ok:
                res.read[target] = res.read.get(target, 0) + 1
                if data not in pool:  # read: a base for deeper mutations
                    if len(pool) >= POOL:
                        pool.pop(rng.randrange(len(seeds[target]), len(pool)))
                    pool.append(data)
    res.seconds = time.monotonic() - t0
    return res


def _printable(s: str) -> str:
    """A message as the summary can print it (an input's lone surrogate, escaped)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _save(crash_dir: str, target: str, n: int, data: bytes) -> None:
    os.makedirs(crash_dir, exist_ok=True)
    ext = {"json": "json", "toml": "toml", "names": "txt", "report": "json"}[target]
    with open(os.path.join(crash_dir, f"crash-{n}-{target}.{ext}"), "wb") as f:
        f.write(data)


def _atheris(argv: list[str]) -> None:
    """libFuzzer over the same targets; the first byte picks the target."""
    import atheris  # noqa: PLC0415

    atheris.instrument_all()  # coverage feedback from every module loaded (the tracker's)
    tmp = tempfile.mkdtemp(prefix="tbd_fuzz.")
    targets = Targets(tmp)
    order = [t for t, _ in SHARE]

    def one(data: bytes) -> None:
        if not data:
            return
        with contextlib.redirect_stdout(io.StringIO()):
            getattr(targets, order[data[0] % len(order)])(data[1:], random.Random(data[0]))

    corpus = os.path.join(tmp, "corpus")
    os.makedirs(corpus)
    for t, inputs in seed_inputs(targets).items():
        for j, d in enumerate(inputs):
            with open(os.path.join(corpus, f"{t}-{j}"), "wb") as f:
                f.write(bytes([order.index(t)]) + d)
    atheris.Setup([sys.argv[0], corpus] + argv, one)
    atheris.Fuzz()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz (60)")
    p.add_argument("--seed", type=int, default=1, help="the mutation loop's seed (1)")
    p.add_argument("--crash-dir", help="write each crash's input here")
    p.add_argument("--atheris", action="store_true",
                   help="libFuzzer through atheris (must be importable); its flags after --")
    args, rest = p.parse_known_args(argv)
    if args.atheris:
        _atheris([a for a in rest if a != "--"])
        return 0
    res = run(args.seconds, args.seed, args.crash_dir)
    print(res.summary())
    return 1 if res.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
