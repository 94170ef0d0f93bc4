#include "npu/lower/pack.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/tensor_ops.h"
#include "npu/lower/layout_simd.h"

namespace rkd::npu::lower {

namespace {

int32_t load(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i8 ? static_cast<int32_t>(t.data<int8_t>()[i]) : static_cast<int32_t>(t.data<uint8_t>()[i]);
}

uint8_t byte_of(int32_t v) { return static_cast<uint8_t>(static_cast<int8_t>(v)); }

// Pixels per job of the layout conversions: each a 16 x 16 byte transpose per 16 pixels.
constexpr int64_t kChunk = 4096;
static_assert(kC2 == 16, "layout_simd.cc transposes 16-lane blocks");

}  // namespace

void planes_to_blocks(const std::vector<const uint8_t*>& planes, int64_t pixels, uint8_t fill, uint8_t flip, uint8_t* blocks, int64_t surface) {
  const int64_t nb = (static_cast<int64_t>(planes.size()) + 15) / 16, chunks = (pixels + kChunk - 1) / kChunk;
  ops::math_parallel_for(nb * chunks, nb * 16 * pixels, [&](int64_t job) {
    const int64_t b = job / chunks, i0 = (job % chunks) * kChunk, i1 = std::min(pixels, i0 + kChunk);
    const uint8_t* src[16];
    for (size_t lane = 0; lane < 16; ++lane) {
      const size_t j = static_cast<size_t>(b) * 16 + lane;
      src[lane] = j < planes.size() ? planes[j] : nullptr;
    }
    detail::planes_to_block(src, i0, i1, fill, flip, blocks + b * surface);
  });
}

void blocks_to_planes(const uint8_t* blocks, int64_t surface, int64_t pixels, uint8_t flip, const std::vector<uint8_t*>& planes) {
  const int64_t nb = (static_cast<int64_t>(planes.size()) + 15) / 16, chunks = (pixels + kChunk - 1) / kChunk;
  ops::math_parallel_for(nb * chunks, nb * 16 * pixels, [&](int64_t job) {
    const int64_t b = job / chunks, i0 = (job % chunks) * kChunk, i1 = std::min(pixels, i0 + kChunk);
    const uint8_t* src = blocks + b * surface;
    uint8_t* dst[16];
    int used = 0;
    for (size_t lane = 0; lane < 16; ++lane) {
      const size_t j = static_cast<size_t>(b) * 16 + lane;
      dst[lane] = j < planes.size() ? planes[j] : nullptr;
      used += dst[lane] != nullptr;
    }
    if (used > 0) detail::block_to_planes(src, i0, i1, flip, dst);  // none: a depthwise window's block another task computes
  });
}

int32_t weight_offset(const ConvSpec& s) { return s.dtype == DType::u8 ? 128 - s.w_zero_points[0] : -s.w_zero_points[0]; }

PackedWeights pack_weights(const ConvSpec& s, const std::vector<int64_t>& channels) {
  const Tensor w = s.weights.contiguous();
  const int64_t kk = s.KH * s.KW, ICp = stored_channels(s.C), n = static_cast<int64_t>(channels.size());
  const int64_t per_kernel_c = s.depthwise ? 1 : s.C;
  const int32_t ow_op = weight_offset(s);
  auto wval = [&](int64_t k, int64_t c, int64_t ky, int64_t kx) -> int32_t {  // w_s, or -OW_OP where padded
    if (k >= n || c >= per_kernel_c) return -ow_op;
    return stored(load(w, ((channels[static_cast<size_t>(k)] * per_kernel_c + c) * s.KH + ky) * s.KW + kx), s.dtype);
  };
  PackedWeights p;
  if (s.depthwise) {
    const int64_t L = kDepthwiseWeightLanes, cp = align(n, L);
    p.bytes.assign(static_cast<size_t>(cp * kk), 0);
    for (int64_t k = 0; k < cp; ++k)
      for (int64_t ky = 0; ky < s.KH; ++ky)
        for (int64_t kx = 0; kx < s.KW; ++kx)
          p.bytes[static_cast<size_t>((k / L) * kk * L + (ky * s.KW + kx) * L + k % L)] = byte_of(wval(k, 0, ky, kx));
    p.kernels = n;
    p.bytes_per_kernel = kk;
    return p;
  }
  p.kernels = align(n, 2);  // an even number of kernels, as Mesa and the vendor pack them
  p.bytes_per_kernel = kk * ICp;
  p.bytes.assign(static_cast<size_t>(p.kernels * kk * ICp), 0);
  for (int64_t k = 0; k < p.kernels; ++k) {
    const int64_t GO = kWeightOutputGroup, GI = kWeightInputGroup;
    const int64_t oc1 = k / GO, goc = std::min<int64_t>(GO, p.kernels - GO * oc1);
    for (int64_t c = 0; c < ICp; ++c) {
      const int64_t ic1 = c / GI, gic = std::min<int64_t>(GI, ICp - GI * ic1);
      for (int64_t ky = 0; ky < s.KH; ++ky)
        for (int64_t kx = 0; kx < s.KW; ++kx) {
          const int64_t at = oc1 * GO * kk * ICp + ic1 * goc * kk * GI + ((ky * s.KW + kx) * goc + k % GO) * gic + c % GI;
          p.bytes[static_cast<size_t>(at)] = byte_of(k >= n ? 0 : wval(k, c, ky, kx));  // padded kernels 0
        }
    }
  }
  return p;
}

Result<std::vector<int32_t>> fold_bias(const ConvSpec& s, const std::vector<int64_t>& channels, int truncate) {
  const Tensor w = s.weights.contiguous();
  const int64_t kk = s.KH * s.KW, per_kernel_c = s.depthwise ? 1 : s.C;
  const int32_t zw = s.w_zero_points[0], zx = stored(s.x_zero_point, s.dtype);
  std::vector<int32_t> bias(channels.size());
  for (size_t k = 0; k < channels.size(); ++k) {
    const int64_t oc = channels[k];
    int64_t sum = 0;
    for (int64_t c = 0; c < per_kernel_c; ++c)
      for (int64_t t = 0; t < kk; ++t) sum += load(w, (oc * per_kernel_c + c) * kk + t) - zw;
    int64_t b = (s.bias.empty() ? 0 : s.bias[static_cast<size_t>(oc)]) - static_cast<int64_t>(zx) * sum;
    if (truncate > 0) b = (b + (int64_t{1} << (truncate - 1))) >> truncate;
    if (b < INT32_MIN || b > INT32_MAX) return unsupported("npu lowering: folded bias of channel " + std::to_string(oc) + " overflows int32");
    bias[k] = static_cast<int32_t>(b);
  }
  return bias;
}

int64_t written_channels(const ConvSpec& s, int64_t n) {
  return s.depthwise ? align(n, kDepthwiseOutputChannelAlign) : align(std::max<int64_t>(n, kOutputChannelAlign), kOutputChannelAlign);
}

PackedOperands pack_bs_operands(const std::vector<int32_t>& bias, const std::vector<int32_t>& mul, int64_t written) {
  PackedOperands p;
  if (mul.empty()) {
    p.layout = BsOperands::alu;
    p.bytes.assign(static_cast<size_t>(written) * 4, 0);
    std::memcpy(p.bytes.data(), bias.data(), bias.size() * 4);
    return p;
  }
  p.layout = BsOperands::alu_mul;
  p.bytes.assign(static_cast<size_t>(align(written, 8) / 8 * kBsBlockBytes), 0);
  for (size_t k = 0; k < bias.size(); ++k) {
    const size_t blk = k / 8 * static_cast<size_t>(kBsBlockBytes), lane = k % 8;
    std::memcpy(p.bytes.data() + blk + 4 * lane, &bias[k], 4);
    const int16_t m = static_cast<int16_t>(mul[k]);
    std::memcpy(p.bytes.data() + blk + 48 + 2 * lane, &m, 2);
  }
  return p;
}

}  // namespace rkd::npu::lower
