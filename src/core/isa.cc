#include "core/isa.h"

#include <hwy/targets.h>

#include <cstdio>
#include <cstdlib>

namespace rkd {

namespace {

constexpr struct {
  IsaLevel level;
  const char* name;
} kLevels[] = {
    {IsaLevel::native, "native"}, {IsaLevel::avx512_vnni, "avx512_vnni"},
    {IsaLevel::avx512, "avx512"}, {IsaLevel::avx2_vnni, "avx2_vnni"},
    {IsaLevel::avx2, "avx2"},     {IsaLevel::sse4, "sse4"},
};

std::string accepted_names() {
  std::string s;
  for (const auto& l : kLevels) {
    if (!s.empty()) s.append(", ");
    s.append(l.name);
  }
  return s;
}

}  // namespace

Result<IsaLevel> parse_isa_level(std::string_view name) {
  for (const auto& l : kLevels) {
    if (name == l.name) {
#if !defined(__x86_64__)
      if (l.level != IsaLevel::native) return unsupported(std::string(name) + " is an x86-64 level; this is not an x86-64 build (only native)");
#endif
      return l.level;
    }
  }
  std::string msg(name);
  msg += " is not an instruction-set level (";
  msg += accepted_names();
  msg += ")";
  return invalid(msg);
}

const char* isa_level_name(IsaLevel level) {
  for (const auto& l : kLevels)
    if (l.level == level) return l.name;
  return "?";
}

IsaLevel isa_ceiling() {
  static const IsaLevel ceiling = [] {
    const char* env = std::getenv("RKD_MAX_ISA");
    if (!env || !*env) return IsaLevel::native;
    Result<IsaLevel> l = parse_isa_level(env);
    if (!l.ok()) {
      std::fprintf(stderr, "rkdeploy: RKD_MAX_ISA=%s: %s\n", env, l.error().message.c_str());
      std::exit(2);
    }
    return *l;
  }();
  return ceiling;
}

bool apply_isa_ceiling_to_highway() {
  static const bool applied = [] {
#if defined(__x86_64__)
    // Highway numbers better targets with lower bits: disabling every bit below the best target
    // allowed also disables targets newer than this Highway knows by name.
    int64_t best = 0;
    switch (isa_ceiling()) {
      case IsaLevel::native: return true;
      case IsaLevel::avx512_vnni: best = HWY_AVX3_DL; break;
      case IsaLevel::avx512: best = HWY_AVX3; break;
      case IsaLevel::avx2_vnni:
      case IsaLevel::avx2: best = HWY_AVX2; break;
      case IsaLevel::sse4: best = HWY_SSE4; break;
    }
    hwy::DisableTargets(best - 1);
#endif
    return true;
  }();
  return applied;
}

int x86_clone_level() {
  static const int level = [] {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    const IsaLevel c = isa_ceiling();
    if (c >= IsaLevel::avx512 && __builtin_cpu_supports("x86-64-v4")) return 4;
    if (c >= IsaLevel::avx2 && __builtin_cpu_supports("x86-64-v3")) return 3;
#endif
    return 0;
  }();
  return level;
}

}  // namespace rkd
