// core/error.cpp: formatting of tbd::Error.
#include "core/error.h"

namespace tbd::detail {

void throw_error(const char* expr, const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << msg;
  if (expr && *expr) os << " [check: " << expr << "]";
  os << " (" << file << ":" << line << ")";
  throw Error(os.str());
}

}  // namespace tbd::detail
