"""tbd_track: per-commit performance tracking for tbd_bench (and any Google Benchmark) JSON.

Subcommands: compare, run, history, bisect, report. See `tools/tbd_track --help` and
docs/tracking.md.
"""
