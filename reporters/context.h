// reporters/context.h: the facts of a run that every row shares (the JSON "context").
//
// Added to Google Benchmark's own context (date, host, CPU, caches, load) with
// benchmark::AddCustomContext, so the JSON file says what produced its numbers: backend and
// device, the peak FP32 rate and memory bandwidth utilizations divide by and how they were
// obtained, threads, math mode, library versions (Backend::describe()), git commit and whether
// the tree was dirty, build type, and the options that change what is measured. Keys:
// results/README.md. (The metric table, context.tbd_metrics, is an object, not a string: it is
// inserted after the run, reporters/metrics.h.)
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tbd {

struct GitState {
  std::string commit = "unknown";  // full hash
  std::string dirty = "unknown";   // "true" | "false" | "unknown"
};
// `git -C dir rev-parse HEAD` and `git -C dir status --porcelain --untracked-files=no`
// (untracked files such as earlier results do not make a tree dirty).
GitState git_state(const std::string& dir);

// Adds every entry with benchmark::AddCustomContext (keys must be new).
void add_context(const std::map<std::string, std::string>& ctx);

// A few readable lines summarising the context, for the console.
std::vector<std::string> context_lines(const std::map<std::string, std::string>& ctx);

}  // namespace tbd
