// RKD_TARGET_CLONES: compile a function for AVX-512 (x86-64-v4) and AVX2 (x86-64-v3) as well
// as the baseline, the loader picking one per CPU (GCC function multi-versioning). For loops
// whose integer or exactly rounded float arithmetic the compiler vectorises: every clone
// computes the same values. Empty elsewhere (other compilers and targets, sanitizer builds).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define RKD_TARGET_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RKD_TARGET_CLONES
#endif
