"""The documents `report` reads back: a comparison (compare --format json, run's
comparison.json), a history document (history detect --format json) and a frameworks summary
(peer's frameworks.json), each checked against the shape the tracker writes (compare.py's
dataclasses, history.build_document, frameworks.summarize) before a section touches it.

A document of the right kind with a field of the wrong type (an edited or truncated-and-mended
file, another tool's JSON) is an InputError naming the file and the field (exit 2), never a
traceback from deep inside a chart. Fields the tracker does not write are allowed (a newer
tracker's document), fields it writes must have its types.
"""

from __future__ import annotations

from ..inputs import ANY, NUMBER, SCALAR, InputError, List, Map, Obj, Opt, check_shape, read_json

# compare.py: Comparison.to_dict(), NaN written as null.
_METRIC = Obj({
    "metric": str, "direction": str, "exact": bool, "unit": str, "base": NUMBER,
    "new": NUMBER, "ratio": NUMBER, "ci": Opt(List(NUMBER)), "ci_level": NUMBER, "p": NUMBER,
    "q": NUMBER, "test": str, "threshold": NUMBER, "n_base": NUMBER, "n_new": NUMBER,
    "noise_base": NUMBER, "noise_new": NUMBER, "verdict": str, "samples_base": List(NUMBER),
    "samples_new": List(NUMBER), "note": str, "acknowledged": str}, required=("metric",))
_ROW = Obj({
    "name": str, "family": str, "status": str, "verdict": str, "time_unit": str,
    "unit_note": str, "source_note": str, "notes": List(str), "errors_base": List(str),
    "errors_new": List(str), "reason": str, "metrics": List(_METRIC)}, required=("name",))
_FAMILY = Obj({
    "family": str, "compared": NUMBER, "geomean_time_ratio": NUMBER, "ci": Opt(List(NUMBER)),
    "regressions": NUMBER, "improvements": NUMBER, "unchanged": NUMBER})
_LAYER_DELTA = Obj({
    "layer": str, "kind": str, "status": str}, rest=NUMBER)
_BREAKDOWN = Obj({
    "benchmark": str, "base_step_s": NUMBER, "new_step_s": NUMBER, "base_sum_s": NUMBER,
    "new_sum_s": NUMBER, "layers": List(_LAYER_DELTA)})
COMPARISON = Obj({
    "base_files": List(str), "new_files": List(str), "base_label": str, "new_label": str,
    "context": List(Obj({"key": str, "base": str, "new": str, "differs": bool,
                         "refuse": bool}, required=("key",))),
    "comparable": bool, "refuse_reasons": List(str), "unit_of_analysis": str,
    "alpha": NUMBER, "threshold": NUMBER, "config": str, "rows": List(_ROW),
    "families": List(_FAMILY), "breakdowns": List(_BREAKDOWN), "notes": List(str),
    "exit_code": NUMBER, "verdict": str, "power": ANY}, required=("rows", "verdict"))

# history.build_document().
_EVENT = Obj({
    "kind": str, "verdict": str, "commit": str, "prev_commit": str, "index": int,
    "ratio": NUMBER, "from": NUMBER, "to": NUMBER, "fixed_by": Opt(str), "open": bool,
    "detail": str, "unmeasured_between": NUMBER, "acknowledged": str})
_SERIES = Obj({
    "benchmark": str, "metric": str, "direction": str, "unit": str, "exact": bool,
    "threshold": NUMBER, "noise": NUMBER,
    "points": List(Obj({"commit": str, "index": int, "value": NUMBER,
                        "samples": List(NUMBER)})),
    "segments": List(Obj({"start": int, "end": int, "level": NUMBER})),
    "events": List(_EVENT)})
HISTORY = Obj({
    "store": str, "machine": str, "machine_info": Map(SCALAR), "ref": str,
    "commits": List(Obj({"commit": str, "short": str, "subject": str, "date": str,
                         "files": NUMBER})),
    "off_branch": List(str), "series": List(_SERIES)}, required=("commits", "series"))

# frameworks.summarize(), and peer's additions (files, schedule).
_SIDE = Obj({"files": NUMBER, "errors": List(str), "absent": bool},
            rest=Obj({"median": NUMBER, "n": NUMBER, "samples": List(NUMBER)}))
_FRAMEWORK_ROW = Obj({
    "benchmark": str, "unit": str, "rate": Opt(str), "sides": Map(_SIDE),
    "ratios": Map(Map(Obj({"ratio": NUMBER, "ci": List(NUMBER), "coverage": NUMBER})))},
    required=("benchmark", "unit", "rate", "sides", "ratios"))
FRAMEWORKS = Obj({
    "reference": str, "sides": List(str), "level": NUMBER, "rows": List(_FRAMEWORK_ROW),
    "contexts": Map(Map(SCALAR)), "notes": List(str), "files": List(str), "schedule": ANY},
    required=("reference", "sides", "level", "rows", "contexts", "notes"))


def load_comparison(path: str) -> dict:
    doc = read_json(path, "a comparison (tbd_track compare --format json)")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or "verdict" not in doc:
        raise InputError("not a comparison (tbd_track compare --format json): no 'rows' list "
                         "or 'verdict'", path)
    check_shape(doc, COMPARISON, path)
    return doc


def load_history(path: str) -> dict:
    doc = read_json(path, "a history document (tbd_track history detect --format json)")
    if not isinstance(doc, dict) or not isinstance(doc.get("commits"), list) or \
            not isinstance(doc.get("series"), list):
        raise InputError("not a history document: needs 'commits' and 'series' lists", path)
    check_shape(doc, HISTORY, path)
    return doc


def load_frameworks(path: str) -> dict:
    doc = read_json(path, "a frameworks summary (tbd_track peer's frameworks.json)")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or \
            not isinstance(doc.get("sides"), list) or "reference" not in doc:
        raise InputError("not a frameworks summary (tbd_track peer's frameworks.json, or "
                         "compare --format json of a tbd file against a peer's): needs "
                         "'reference', 'sides' and 'rows'", path)
    check_shape(doc, FRAMEWORKS, path)
    # The table has a column per side: every row has each side, the reference is one.
    if doc["reference"] not in doc["sides"]:
        raise InputError(f"the reference {doc['reference']!r} is not one of the sides", path,
                         field="reference")
    for i, row in enumerate(doc["rows"]):
        missing = [s for s in doc["sides"] if s not in row["sides"]]
        if missing:
            raise InputError(f"no entry for the side(s) {', '.join(map(repr, missing))}", path,
                             field=f"rows[{i}].sides")
    return doc
