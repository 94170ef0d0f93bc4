// The one style of every JSON document rkdeploy prints or writes (docs/cli-json.md): objects
// indented by two spaces, keys in the order the producer set them (nlohmann::ordered_json) or
// sorted (nlohmann::json), one final newline. A template so that core does not depend on the
// JSON library; pass any nlohmann::basic_json.
#pragma once

#include <map>
#include <string>

namespace rkd {

constexpr int kJsonIndent = 2;

// Strings that are not UTF-8 (a file name or a tensor name of other bytes) print with U+FFFD
// in place of each bad byte instead of failing: the document still says what happened.
template <typename Json>
std::string json_text(const Json& j) {
  return j.dump(kJsonIndent, ' ', false, Json::error_handler_t::replace) + "\n";
}

// A string record (the environment of bench and plan) as a JSON object: a value of decimal
// digits only is a number (threads, hardware_threads, runs), everything else a string.
template <typename Json>
Json json_record(const std::map<std::string, std::string>& m) {
  Json j = Json::object();
  for (const auto& [k, v] : m) {
    bool digits = !v.empty() && v.size() < 16;
    for (char c : v) digits &= c >= '0' && c <= '9';
    if (digits) j[k] = std::stoll(v);
    else j[k] = v;
  }
  return j;
}

}  // namespace rkd
