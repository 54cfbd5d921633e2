"""Building tbd_bench at a commit, in a git worktree, once per commit.

<work>/worktrees/<sha12>   `git worktree add --detach` of the commit
<work>/builds/<sha12>      its Release build (CPU only unless cuda=True; no tests), reused
<work>/builds/<sha12>/BUILD_FAILED   the log tail of a failed build: the commit is skipped
                                     later without rebuilding (delete it to retry)

The work folder defaults to ~/.cache/tbd-track. A build of tbd_bench takes several minutes on a
2-core machine; every later use of the commit is free.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .gbjson import InputError


class BuildError(Exception):
    """A commit that does not build (bisect skips it)."""


def default_work_dir() -> str:
    return os.environ.get("TBD_TRACK_WORK") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tbd-track")


def git(repo: str, *args: str, check: bool = True) -> str:
    r = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise InputError(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def resolve(repo: str, rev: str) -> str:
    r = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", rev + "^{commit}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise InputError(f"'{rev}' is neither an executable file nor a commit of {repo}")
    return r.stdout.strip()


def is_binary(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def build_commit(repo: str, sha: str, work: str | None = None, cuda: bool = False,
                 target: str = "tbd_bench", log=sys.stderr) -> str:
    """Path of tbd_bench built at `sha` (built now unless built before)."""
    work = work or default_work_dir()
    short = sha[:12]
    wt = os.path.join(work, "worktrees", short)
    bdir = os.path.join(work, "builds", short + ("-cuda" if cuda else ""))
    failed = os.path.join(bdir, "BUILD_FAILED")
    exe = os.path.join(bdir, target)
    if os.path.exists(failed):
        with open(failed, encoding="utf-8") as f:
            raise BuildError(f"{short} did not build before (see {failed}; delete it to "
                             f"retry): {_first_error(f.read().strip().splitlines())}")
    if is_binary(exe) and os.path.exists(os.path.join(bdir, "BUILT")):
        return exe
    os.makedirs(os.path.dirname(wt), exist_ok=True)
    if not os.path.isdir(wt):
        subprocess.run(["git", "-C", repo, "worktree", "prune"], capture_output=True)
        git(repo, "worktree", "add", "--detach", "--force", wt, sha)
    os.makedirs(bdir, exist_ok=True)
    print(f"tbd_track: building {target} at {short} in {bdir} (once per commit)", file=log,
          flush=True)
    env = dict(os.environ)
    if os.path.isdir("/usr/local/cuda/bin"):
        env["PATH"] = "/usr/local/cuda/bin:" + env.get("PATH", "")
    steps = [["cmake", "-S", wt, "-B", bdir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
              f"-DTBD_CUDA={'ON' if cuda else 'OFF'}", "-DTBD_BUILD_TESTS=OFF",
              "-Wno-dev", "--no-warn-unused-cli"],
             ["cmake", "--build", bdir, "--target", target]]
    logpath = os.path.join(bdir, "build.log")
    with open(logpath, "w", encoding="utf-8") as lf:
        for cmd in steps:
            r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env)
            if r.returncode != 0:
                lf.flush()
                with open(logpath, encoding="utf-8", errors="replace") as f:
                    tail = f.read().strip().splitlines()[-15:]
                with open(failed, "w", encoding="utf-8") as f:
                    f.write("\n".join(tail) + "\n")
                raise BuildError(f"{short} does not build ({' '.join(cmd[:2])} failed; log "
                                 f"{logpath}): {_first_error(tail)}")
    if not is_binary(exe):
        with open(failed, "w", encoding="utf-8") as f:
            f.write(f"the build did not produce {exe}\n")
        raise BuildError(f"{short}: the build did not produce {exe}")
    open(os.path.join(bdir, "BUILT"), "w").close()
    return exe


def _first_error(lines: list[str]) -> str:
    """The line of a build log tail that names the error (else its last line)."""
    for i, line in enumerate(lines):
        if "error" in line.lower():
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return (line.strip() + (" " + nxt if nxt and "error" not in nxt.lower() else ""))
    return lines[-1].strip() if lines else ""


def remove_worktree(repo: str, work: str, sha: str) -> None:
    wt = os.path.join(work, "worktrees", sha[:12])
    if os.path.isdir(wt):
        subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", wt],
                       capture_output=True)
        shutil.rmtree(wt, ignore_errors=True)
