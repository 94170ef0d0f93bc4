// Typed reads of optional fields of a parsed JSON object (any nlohmann::basic_json; a template
// so that core does not depend on the JSON library). A missing field leaves `into` as it was;
// a field of another type is an invalid Error "NAME: must be ...", never an exception
// (nlohmann's value() and get() throw on a type mismatch, and converting 1e30 to int64 is
// undefined behaviour: both fuzz findings, docs/fuzzing.md). NAME is how the caller names the
// field in errors, e.g. "model.json: field 'width'" or "m.json: measurements[0].role".
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace rkd {

template <typename Json>
Status json_string(const Json& j, const char* key, std::string& into, const std::string& name) {
  if (!j.contains(key)) return {};
  if (!j[key].is_string()) return invalid(name + ": must be a string");
  into = j[key].template get<std::string>();
  return {};
}

// Any JSON number, stored as T (float or double).
template <typename Json, typename T>
Status json_number(const Json& j, const char* key, T& into, const std::string& name) {
  if (!j.contains(key)) return {};
  if (!j[key].is_number()) return invalid(name + ": must be a number");
  into = static_cast<T>(j[key].template get<double>());
  return {};
}

// A JSON true or false.
template <typename Json>
Status json_bool(const Json& j, const char* key, bool& into, const std::string& name) {
  if (!j.contains(key)) return {};
  if (!j[key].is_boolean()) return invalid(name + ": must be true or false");
  into = j[key].template get<bool>();
  return {};
}

// A JSON integer within int64 (a number with a fraction or an exponent is refused).
template <typename Json>
Status json_integer(const Json& j, const char* key, int64_t& into, const std::string& name) {
  if (!j.contains(key)) return {};
  if (!j[key].is_number_integer()) return invalid(name + ": must be an integer");
  if (j[key].is_number_unsigned() && j[key].template get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return invalid(name + ": is out of range");
  }
  into = j[key].template get<int64_t>();
  return {};
}

}  // namespace rkd
