// The readable MSDA reference: loops over (b, q, head, channel, point). Semantics in
// deform_attn.h.
#include "kernels/deform_attn.h"
#include "kernels/deform_attn_coords.h"

namespace rkd {

void msda_reference_f32(const MsdaProblem& p, MsdaMethod method) {
  const MsdaValue& v = *p.value;
  const int64_t B = v.batch, nH = v.heads, hd = v.head_dim, hdp = v.head_dim_padded;
  const int64_t P = p.total_points;
  const float* data = v.data.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t q = 0; q < p.queries; ++q) {
      for (int64_t m = 0; m < nH; ++m) {
        const float* head = data + (b * nH + m) * v.head_stride();
        const float* loc = p.locations + ((b * p.queries + q) * nH + m) * P * 2;
        const float* wt = p.weights + ((b * p.queries + q) * nH + m) * P;
        float* out = p.out + (b * p.queries + q) * nH * hd + m * hd;
        for (int64_t c = 0; c < hd; ++c) {
          float acc = 0.0f;
          for (int64_t k = 0; k < P; ++k) {
            const int64_t l = p.point_level[static_cast<size_t>(k)];
            const int64_t H = v.levels[static_cast<size_t>(l)].h, W = v.levels[static_cast<size_t>(l)].w;
            const float* level = head + v.level_start[static_cast<size_t>(l)] * hdp;
            float sample;
            if (method == MsdaMethod::bilinear) {
              const auto cr = msda_detail::bilinear_corners(loc[2 * k], loc[2 * k + 1], H, W);
              float val[4];
              for (int i = 0; i < 4; ++i) val[i] = cr.ok[i] ? level[cr.token[i] * hdp + c] : 0.0f;
              sample = std::fma(val[3], cr.weight[3], std::fma(val[2], cr.weight[2], std::fma(val[1], cr.weight[1], val[0] * cr.weight[0])));
            } else {
              sample = level[msda_detail::discrete_token(loc[2 * k], loc[2 * k + 1], H, W, method) * hdp + c];
            }
            const float prod = sample * wt[k];
            acc = acc + prod;
          }
          out[c] = acc;
        }
      }
    }
  }
}

}  // namespace rkd
