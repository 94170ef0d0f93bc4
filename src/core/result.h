// Result<T> and Error: how every fallible call in rkdeploy reports failure.
//
// Contract:
//  - An Error has a kind and a message. The message names what was wrong: the file,
//    tensor, dimension, node or field, and the value seen, e.g.
//    "grid: dimension 3 must be 2 for a 4-D input, got 3".
//  - kind distinguishes data that is wrong (invalid) from data that is well-formed but
//    that this build does not handle (unsupported), and from the environment (io).
//  - Functions at trust boundaries (files, command line, public kernel entry points)
//    validate fully and return Result; inner loops only assert.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace rkd {

enum class ErrorKind {
  invalid,      // the input breaks a rule of its format or of the operation
  unsupported,  // the input is valid but this build does not implement it
  io,           // the file system or the OS failed
  internal,     // a broken invariant inside rkdeploy (a bug)
};

const char* error_kind_name(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::invalid;
  std::string message;

  // "invalid: grid: ..." - what the command line prints.
  std::string to_string() const;
  // Returns a copy whose message is "context: message" (e.g. the file name), or an unchanged
  // copy when the message starts with "context: " already.
  Error with_context(const std::string& context) const;
};

inline Error invalid(std::string msg) { return Error{ErrorKind::invalid, std::move(msg)}; }
inline Error unsupported(std::string msg) { return Error{ErrorKind::unsupported, std::move(msg)}; }
inline Error io_error(std::string msg) { return Error{ErrorKind::io, std::move(msg)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T value_or(T fallback) const& { return ok() ? std::get<0>(v_) : fallback; }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace rkd

// Propagate a failed Status or Result from the current function.
#define RKD_TRY(expr)                                          \
  do {                                                         \
    auto rkd_try_status_ = (expr);                             \
    if (!rkd_try_status_.ok()) return rkd_try_status_.error(); \
  } while (0)

#define RKD_CONCAT_INNER(a, b) a##b
#define RKD_CONCAT(a, b) RKD_CONCAT_INNER(a, b)
// RKD_ASSIGN(auto x, expr): x = expr.value(), or return its error.
#define RKD_ASSIGN(decl, expr) RKD_ASSIGN_IMPL(RKD_CONCAT(rkd_res_, __LINE__), decl, expr)
#define RKD_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                     \
  if (!tmp.ok()) return tmp.error();     \
  decl = std::move(tmp).value()
