// Parallel loops of tensor_ops (private to src/kernels).
//
// The tensor kernels run on OpenMP, the same threads oneDNN uses, so that the executor has
// one set of worker threads: with two runtimes (OpenMP for oneDNN, core's ThreadPool for
// our loops) each one's idle workers spin on the cores the other needs; measured on 2
// vCPUs, Softmax at 2 threads took as long as at 1 until the loops moved here.
#pragma once

#include <omp.h>

#include <cstdint>

namespace rkd::ops {

// fn(i) for every i in [0, n), dynamically scheduled over omp_get_max_threads() threads
// (set by set_math_threads); serial when n < 2 or one thread is configured.
template <typename F>
void omp_for(int64_t n, const F& fn) {
  if (n < 2 || omp_get_max_threads() <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

inline int omp_threads() { return omp_get_max_threads(); }

}  // namespace rkd::ops
