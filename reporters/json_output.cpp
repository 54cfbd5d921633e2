// reporters/json_output.cpp: NaN/Infinity -> null outside JSON strings.
#include "reporters/json_output.h"

#include <fstream>
#include <sstream>

namespace tbd {

std::string sanitize_json_numbers(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < s.size())
        out += s[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    std::size_t j = i + (c == '-' ? 1 : 0);
    bool replaced = false;
    for (const char* tok : {"NaN", "Infinity"}) {
      std::string t(tok);
      if (s.compare(j, t.size(), t) == 0) {
        out += "null";
        i = j + t.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

bool sanitize_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  in.close();
  std::string text = ss.str();
  std::string clean = sanitize_json_numbers(text);
  if (clean == text) return true;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << clean;
  return static_cast<bool>(out);
}

bool set_json_file_key(const std::string& path, const std::string& key,
                       const nlohmann::ordered_json& value) {
  nlohmann::ordered_json doc;  // ordered: Google Benchmark's key order stays as written
  {
    std::ifstream in(path);
    if (!in) return false;
    doc = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  if (doc.is_discarded()) return false;
  doc[key] = value;
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return static_cast<bool>(out);
}

}  // namespace tbd
