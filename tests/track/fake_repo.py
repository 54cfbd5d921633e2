"""A tiny git repository whose "tbd_bench" is a script, for testing run, history and bisect.

Each commit's speed.txt sets how slow its benchmark is; a commit can be made not to build. The
script understands the Google Benchmark flags tbd_track passes and writes Google Benchmark
JSON with a tbd-like context (git_commit of its source tree), with log-normal noise: 1 % unless
FAKE_NOISE says otherwise.
"""

import os
import subprocess
import tempfile

CMAKE = """cmake_minimum_required(VERSION 3.20)
project(fake NONE)
option(TBD_CUDA "" OFF)
option(TBD_BUILD_TESTS "" ON)
file(READ ${CMAKE_SOURCE_DIR}/speed.txt SPEED)
string(STRIP "${SPEED}" SPEED)
execute_process(COMMAND git -C ${CMAKE_SOURCE_DIR} rev-parse HEAD
                OUTPUT_VARIABLE COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE)
configure_file(${CMAKE_SOURCE_DIR}/bench.py.in ${CMAKE_BINARY_DIR}/tbd_bench @ONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
add_custom_target(tbd_bench)
"""

BENCH = r'''#!/usr/bin/env python3
import json, math, os, random, sys, zlib
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
out = args["benchmark_out"]
reps = int(args.get("benchmark_repetitions", "1"))
speed = float("@SPEED@")
noise = float(os.environ.get("FAKE_NOISE", "0.01"))
rng = random.Random(zlib.crc32(out.encode()) ^ (int(os.environ.get("FAKE_SEED", "0"))))
rows = []
for name, base in (("Fake/train/batch:1", 10.0), ("Fake/layer/fwd/batch:8", 2.0)):
    filt = args.get("benchmark_filter")
    if filt and filt not in name and not __import__("re").search(filt, name):
        continue
    for i in range(reps):
        t = base * speed * math.exp(rng.gauss(0, noise))
        rows.append({"name": name, "run_name": name, "run_type": "iteration",
                     "repetitions": reps, "repetition_index": i, "threads": 1,
                     "iterations": 10, "real_time": t, "cpu_time": t, "time_unit": "ms",
                     "items_per_second": 1000.0 / t, "peak_memory_bytes": 1000.0})
ctx = {"date": "2026-12-03T10:00:00+00:00", "host_name": "vm", "num_cpus": 2,
       "backend": "cpu", "device": "Fake CPU", "threads": "2", "math": "fp32",
       "git_commit": "@COMMIT@", "git_dirty": "false"}
with open(out + ".tmp", "w") as f:
    json.dump({"context": ctx, "benchmarks": rows}, f)
os.replace(out + ".tmp", out)
'''


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(speeds):
    """speeds: one entry per commit, a float or None (that commit does not build).

    Returns (repo path, [commit shas oldest first])."""
    repo = tempfile.mkdtemp(prefix="tbd_track_fake.")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    with open(os.path.join(repo, "bench.py.in"), "w") as f:
        f.write(BENCH)
    shas = []
    for i, s in enumerate(speeds):
        with open(os.path.join(repo, "CMakeLists.txt"), "w") as f:
            f.write(CMAKE if s is not None else 'cmake_minimum_required(VERSION 3.20)\n'
                    'project(fake NONE)\nmessage(FATAL_ERROR "this commit does not build")\n')
        with open(os.path.join(repo, "speed.txt"), "w") as f:
            f.write(f"{s if s is not None else 1.0}\n")
        with open(os.path.join(repo, "revision.txt"), "w") as f:
            f.write(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}: speed {s}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas
