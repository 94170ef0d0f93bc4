// The instruction-set ceiling: one knob that caps every run-time CPU dispatch in rkdeploy, so
// that a machine with AVX-512 VNNI also runs (and tests) the code an AVX2-only or an SSE4-only
// CPU runs.
//
// Contract:
//  - The ceiling comes from the environment variable RKD_MAX_ISA, read once per process:
//    native (or unset), avx512_vnni, avx512, avx2_vnni, avx2, sse4. Each level allows the
//    instruction sets below it (avx512 does not include AVX-VNNI, as on Skylake-SP); the CPU's
//    own limit still applies (a ceiling above the CPU changes nothing).
//    On arm64 only `native` is accepted. Any other value is a usage error: the process prints
//    "rkdeploy: RKD_MAX_ISA=..." with the accepted values and exits with status 2.
//  - It governs three dispatchers, each from one place:
//      Highway (the SIMD kernels): apply_isa_ceiling_to_highway(), run before main by every
//        translation unit that dispatches (RKD_HIGHWAY_HONOURS_ISA_CEILING);
//      oneDNN (float convolution and products, the VNNI int8 products): dnnl_set_max_cpu_isa
//        before its engine is made (kernels/tensor_ops_dnnl.cc);
//      the compiler-vectorised loops (RKD_ISA_CLONES below): x86_clone_level().
//    ops::dispatch_report() (kernels/tensor_ops.h) says what each one chose.
//    XNNPACK (the float convolution where oneDNN has only reference kernels: arm64 without SVE,
//    where only `native` exists) picks its kernels itself and is outside the ceiling; on x86 it
//    runs only when a test asks for it.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace rkd {

// Ordered from least to most capable.
enum class IsaLevel { sse4, avx2, avx2_vnni, avx512, avx512_vnni, native };

Result<IsaLevel> parse_isa_level(std::string_view name);
const char* isa_level_name(IsaLevel level);

// The process's ceiling (RKD_MAX_ISA; see the contract above).
IsaLevel isa_ceiling();

// Disables Highway's targets above the ceiling (hwy::DisableTargets; later dispatches re-pick).
// Idempotent; returns true so that it can initialise a static.
bool apply_isa_ceiling_to_highway();

// The x86-64 micro-architecture level the RKD_ISA_CLONES functions run at: 4 (x86-64-v4:
// AVX-512 F/BW/CD/DQ/VL), 3 (x86-64-v3: AVX2, FMA, BMI2), or 0 (the baseline): the highest the
// CPU supports and the ceiling allows (avx512 and up -> 4, avx2 and avx2_vnni -> 3, sse4 -> 0);
// 0 off x86-64.
int x86_clone_level();

}  // namespace rkd

// Every translation unit that calls HWY_DYNAMIC_DISPATCH states this once at namespace scope,
// so that the ceiling is in force before the first dispatch of any program that links it.
#define RKD_HIGHWAY_HONOURS_ISA_CEILING [[maybe_unused]] static const bool rkd_highway_isa_ceiling_applied_ = ::rkd::apply_isa_ceiling_to_highway()

// RKD_ISA_CLONES(name, (params...), (args...), body): defines `void name(params...)` that runs
// `body` (a call of an always-inline function over the parameters) compiled three times, for
// x86-64-v4, x86-64-v3 and the baseline, and picks one per call by x86_clone_level(); `args`
// names the parameters in order. For loops whose integer or exactly rounded float arithmetic
// the compiler vectorises: every clone computes the same values (the project builds with
// -ffp-contract=off, so no clone fuses a multiply and an add). One plain function elsewhere
// (other compilers and targets, sanitizer builds).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define RKD_ISA_CLONES(name, params, args, body)                           \
  [[gnu::target("arch=x86-64-v4")]] void name##_x86_64_v4 params { body; } \
  [[gnu::target("arch=x86-64-v3")]] void name##_x86_64_v3 params { body; } \
  void name##_x86_64_baseline params { body; }                             \
  void name params {                                                       \
    switch (::rkd::x86_clone_level()) {                                    \
      case 4: return name##_x86_64_v4 args;                                \
      case 3: return name##_x86_64_v3 args;                                \
      default: return name##_x86_64_baseline args;                         \
    }                                                                      \
  }
#else
#define RKD_ISA_CLONES(name, params, args, body) \
  void name params { body; }
#endif
