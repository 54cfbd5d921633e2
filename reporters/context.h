// reporters/context.h: the facts of a run that every row shares (the JSON "context").
//
// Added to Google Benchmark's own context (date, host, CPU, caches, load) with
// benchmark::AddCustomContext, so the JSON file says what produced its numbers: backend and
// device, the peak FP32 rate utilizations divide by and how it was obtained, threads, math
// mode, library versions (Backend::describe()), git commit and whether the tree was dirty,
// build type, and the options that change what is measured. Keys: results/README.md.
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
