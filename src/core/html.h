// Small helpers for the self-contained HTML reports (accuracy, analyze, plan): text escaping and
// numbers with a fixed count of significant digits.
#pragma once

#include <iomanip>
#include <sstream>
#include <string>

namespace rkd {

inline std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

inline std::string html_number(double v, int significant = 6) {
  std::ostringstream o;
  o << std::setprecision(significant) << v;
  return o.str();
}

}  // namespace rkd
