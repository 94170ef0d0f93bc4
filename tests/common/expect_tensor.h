// GoogleTest checks on whole tensors shared by the kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/tolerance.h"
#include "core/tensor.h"

namespace rkd {

// a and b of one shape and type, equal element by element under exact_equal (compared as
// float32: every type the kernels produce converts exactly).
inline void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const Tensor fa = *a.to(DType::f32), fb = *b.to(DType::f32);
  for (int64_t i = 0; i < fa.numel(); ++i) {
    ASSERT_TRUE(test::exact_equal(fa.data<float>()[i], fb.data<float>()[i]))
        << what << " at flat index " << i << ": " << fa.data<float>()[i] << " vs " << fb.data<float>()[i];
  }
}

}  // namespace rkd
