// core/error.h: the suite's one error type and its checking macro family.
//
// Every check throws tbd::Error carrying the failed call or condition, file, line and a
// message. Library status checks (CUDA, cuDNN, cuBLAS, CUPTI, oneDNN) are generated from one
// template, check_status<Traits>, so each library only supplies "is this success" and "what
// does this code mean" (nvbench / ggml style). Fixtures catch tbd::Error and turn it into
// state.SkipWithError, so one bad configuration never ends a run.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tbd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown when an allocation does not fit; fixtures report it as "out of memory: ...".
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

namespace detail {

[[noreturn]] void throw_error(const char* expr, const char* file, int line, const std::string& msg);

template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Traits: static bool ok(Status); static std::string message(Status); static const char* lib.
template <class Traits, class Status>
void check_status(Status status, const char* call, const char* file, int line) {
  if (!Traits::ok(status)) {
    throw_error(call, file, line,
                concat(Traits::kLibrary, " error ", static_cast<long long>(status), ": ",
                       Traits::message(status)));
  }
}

}  // namespace detail
}  // namespace tbd

// TBD_CHECK(cond, parts...): throws tbd::Error with the parts streamed together.
#define TBD_CHECK(cond, ...)                                                                     \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::tbd::detail::throw_error(#cond, __FILE__, __LINE__, ::tbd::detail::concat(__VA_ARGS__)); \
  } while (0)

#define TBD_FAIL(...) \
  ::tbd::detail::throw_error("", __FILE__, __LINE__, ::tbd::detail::concat(__VA_ARGS__))

// Library-status checks: TBD_DEFINE_STATUS_CHECK(TBD_CUDA_CHECK, CudaTraits) in a backend.
#define TBD_STATUS_CHECK(Traits, call) \
  ::tbd::detail::check_status<Traits>((call), #call, __FILE__, __LINE__)
