// reporters/json_output.h: making the JSON file safe to read.
//
// Google Benchmark writes non-finite numbers as the bare tokens NaN and Infinity (e.g. the
// coefficient of variation of a counter whose mean is 0, with --benchmark_repetitions), which
// strict JSON parsers (nlohmann, jq, most non-Python readers) reject. tbd_bench rewrites them
// as null in its temporary file before renaming it into place (fixtures/output_file.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tbd {

// Replaces the tokens NaN, -NaN, Infinity and -Infinity outside strings with null.
std::string sanitize_json_numbers(const std::string& text);
// Applies sanitize_json_numbers to a file in place; false if it could not be read or written.
bool sanitize_json_file(const std::string& path);
// Sets the top-level `key` of a finished JSON file to `value` (tbd_breakdown, tbd_dist_steps),
// keeping everything else and Google Benchmark's key order; false if the file could not be
// read, parsed or written.
bool set_json_file_key(const std::string& path, const std::string& key,
                       const nlohmann::ordered_json& value);

}  // namespace tbd
