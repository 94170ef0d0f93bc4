#include "core/result.h"

namespace rkd {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid: return "invalid";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::io: return "io";
    case ErrorKind::internal: return "internal";
  }
  return "?";
}

std::string Error::to_string() const { return std::string(error_kind_name(kind)) + ": " + message; }

Error Error::with_context(const std::string& context) const {
  const std::string prefix = context + ": ";
  if (message.compare(0, prefix.size(), prefix) == 0) return *this;  // named already
  return Error{kind, prefix + message};
}

}  // namespace rkd
