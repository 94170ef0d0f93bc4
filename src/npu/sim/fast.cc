// The simulator's prepared path: the MACs of a chain's tasks on oneDNN's exact int8
// accumulation, one oneDNN convolution per group of tasks over one input map (the epilogue
// that reads them: epilogue_simd.cc). Everything here computes bit for bit what sim.cc's
// stage-by-stage definition computes (the simulator's loop tests compare the two on every
// lowered case).
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/tensor_ops.h"
#include "npu/sim/conv_task.h"

namespace rkd::npu::sim {

namespace detail {

// One oneDNN convolution whose output holds the MACs of a group of tasks that read one input
// map: row r of channel block c1 at base + c1 * surface + r * line. A member reads its own
// rows (and, depthwise, its own channel window) of that map; the group's convolution covers
// the union of the rows it reads and, for direct convolutions, the concatenation of the
// members' distinct kernel sets (channel groups and kernel chunks), for depthwise ones the
// union of their channel windows. A member's (oy, k) is then the group's output at its
// acc_offset + oy * OW * M + k, exactly: the conditions are checked in layout().
struct Group {
  std::vector<size_t> members;               // task indices, in chain order
  std::vector<int64_t> acc_offset, kernel0;  // per member: int32 index of its (pixel 0, kernel 0); its kernel 0
  bool depthwise = false;
  int64_t C = 0, line = 0, surface = 0, OW = 0, OH = 0, M = 0, KH = 1, KW = 1, sy = 1, sx = 1;
  int64_t crop_h = 0, crop_w = 0, pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int32_t pad = 0;
  uint64_t lo = 0, hi = 0;  // the device bytes the group's input copy reads: from the first row it needs
  std::unique_ptr<ops::QConvAccumulator> acc;
  std::vector<int64_t> wsum;  // per kernel: sum of (w + OW_OP) over its taps and channels
  Tensor out;                 // int32 [1, OH, OW, M]
  uint64_t done = 0;          // the run whose MACs `out` holds
};

}  // namespace detail

struct SimCache::Chain {
  std::vector<uint32_t> addresses;
  std::vector<detail::RegValues> regs;
  std::vector<std::vector<uint8_t>> weights;  // each task's weight bytes when planned
  std::vector<detail::Group> groups;
  std::vector<int> group_of;   // -1: the task's MAC on the simulator's loops
  std::vector<size_t> member;  // its place in its group
  uint64_t run = 0;
  size_t mac_runs = 0;
  uint64_t memory = 0, checked_at = 0;  // the weights matched in this DeviceMemory at this sequence()
};

SimCache::SimCache() = default;
SimCache::~SimCache() = default;

namespace detail {

namespace {

uint64_t end_of(uint32_t address, int64_t bytes) { return static_cast<uint64_t>(address) + static_cast<uint64_t>(bytes); }

// Tasks whose MAC oneDNN can compute: w + OW_OP fits int8 for every stored kernel, and the
// written channels past them accumulate 0 (OW_OP 0, or depthwise with every channel stored).
bool eligible(const ConvTask& t, const std::vector<uint8_t>& w) {
  if (t.depthwise ? t.stored() != t.C : (t.stored() < t.OC && t.ow_op != 0)) return false;
  if (static_cast<int64_t>(w.size()) != t.weight_bytes) return false;
  const int64_t cg = t.depthwise ? 1 : t.C;
  for (int64_t k = 0; k < t.stored(); ++k)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t ky = 0; ky < t.KH; ++ky)
        for (int64_t kx = 0; kx < t.KW; ++kx) {
          const int32_t v = static_cast<int8_t>(w[t.weight_index(k, c, ky, kx)]) + t.ow_op;
          if (v < -128 || v > 127) return false;  // uint8 models: w - z_w needs 9 bits
        }
  return true;
}

// Tasks that can read one map in one convolution: the same kind, line and surface strides,
// width, horizontal geometry, kernel size, strides and padding value (direct: the same
// channels).
bool compatible(const ConvTask& a, const ConvTask& b) {
  return a.depthwise == b.depthwise && (a.depthwise || a.C == b.C) && a.W == b.W && a.line == b.line && a.surface == b.surface &&
         a.pad_left == b.pad_left && a.pad_value == b.pad_value && a.KH == b.KH && a.KW == b.KW && a.sx == b.sx && a.sy == b.sy && a.OW == b.OW;
}

// Lays out g.members as one convolution; false when one convolution would not give each
// member's MAC exactly. Each member's input address is decomposed as base + c1 * surface +
// row * line (base: the lowest); the member's taps start at row y0 = row - PAD_TOP. Exact
// when (1) every member reads channel block 0 (direct) and the members' tap origins lie on
// one stride grid; (2) rows a member sees as padding are padding of the union too: rows
// above its window exist in the union only if its window starts at row 0, rows below it only
// if its window ends where the union ends. Rows inside its window are the same bytes.
bool layout(Group& g, const std::vector<ConvTask>& convs) {
  const ConvTask& f = convs[g.members.front()];
  const size_t n = g.members.size();
  uint32_t base = std::numeric_limits<uint32_t>::max();
  for (size_t m : g.members) base = std::min(base, convs[m].input);
  const int64_t L = f.line, S = f.surface, sy = f.sy;
  std::vector<int64_t> c1(n), row(n), y0(n);
  int64_t Y0 = std::numeric_limits<int64_t>::max(), Hv = 0, C = f.depthwise ? 0 : f.C;
  for (size_t i = 0; i < n; ++i) {
    const ConvTask& t = convs[g.members[i]];
    const int64_t off = static_cast<int64_t>(t.input - base), rem = off % S;
    if (rem % L != 0) return false;
    c1[i] = off / S;
    row[i] = rem / L;
    if (!f.depthwise && c1[i] != 0) return false;
    y0[i] = row[i] - t.pad_top;
    Y0 = std::min(Y0, y0[i]);
    Hv = std::max(Hv, row[i] + t.H);
    if (f.depthwise) C = std::max(C, c1[i] * 16 + t.C);
  }
  int64_t OHv = 0;
  std::vector<int64_t> oy0(n);
  for (size_t i = 0; i < n; ++i) {
    const ConvTask& t = convs[g.members[i]];
    if ((y0[i] - Y0) % sy != 0) return false;
    oy0[i] = (y0[i] - Y0) / sy;
    OHv = std::max(OHv, oy0[i] + t.OH);
    const int64_t end = y0[i] + (t.OH - 1) * sy + t.KH;
    if (y0[i] < row[i] && row[i] > 0) return false;
    if (end > row[i] + t.H && row[i] + t.H < Hv) return false;
  }
  const int64_t need_end = Y0 + (OHv - 1) * sy + f.KH;
  const int64_t row_first = std::max<int64_t>(Y0, 0), row_last = std::min(need_end, Hv);
  if (row_last <= row_first) return false;
  g.depthwise = f.depthwise;
  g.C = C;
  g.line = L;
  g.surface = S;
  g.OW = f.OW;
  g.OH = OHv;
  g.KH = f.KH;
  g.KW = f.KW;
  g.sy = sy;
  g.sx = f.sx;
  g.pad = f.pad_value;
  g.crop_h = row_last - row_first;
  g.pad_top = std::max<int64_t>(-Y0, 0);
  g.pad_bottom = std::max<int64_t>(need_end - Hv, 0);
  const int64_t need_w = (f.OW - 1) * f.sx + f.KW - f.pad_left;
  g.crop_w = std::min(need_w, f.W);
  g.pad_left = f.pad_left;
  g.pad_right = std::max<int64_t>(need_w - f.W, 0);
  g.lo = static_cast<uint64_t>(base) + static_cast<uint64_t>(row_first * L);
  g.hi = static_cast<uint64_t>(base) + static_cast<uint64_t>((C / 16 - 1) * S + (row_last - 1) * L + g.crop_w * 16);
  // Kernels: depthwise, one per channel of the union; direct, each distinct set once.
  std::vector<std::pair<std::tuple<uint32_t, int64_t, int32_t>, int64_t>> kernel_sets;  // (weights, kernels, OW_OP) -> kernel 0
  g.kernel0.assign(n, 0);
  g.M = f.depthwise ? C : 0;
  for (size_t i = 0; i < n; ++i) {
    const ConvTask& t = convs[g.members[i]];
    if (f.depthwise) {
      g.kernel0[i] = c1[i] * 16;
      continue;
    }
    const auto key = std::make_tuple(t.weights, t.kernels, t.ow_op);
    auto it = std::find_if(kernel_sets.begin(), kernel_sets.end(), [&](const auto& e) { return e.first == key; });
    if (it == kernel_sets.end()) {
      kernel_sets.emplace_back(key, g.M);
      g.kernel0[i] = g.M;
      g.M += t.stored();
    } else {
      g.kernel0[i] = it->second;
    }
  }
  g.acc_offset.assign(n, 0);
  for (size_t i = 0; i < n; ++i) g.acc_offset[i] = oy0[i] * g.OW * g.M + g.kernel0[i];
  return true;
}

// No task that runs between the group's first member (which computes the group's MACs) and
// its last may write into the bytes the group's input copy reads.
bool input_stays(const Group& g, const std::vector<ConvTask>& convs) {
  for (size_t j = g.members.front(); j < g.members.back(); ++j) {
    if (overlap(convs[j].output, end_of(convs[j].output, convs[j].output_bytes), g.lo, g.hi)) return false;
  }
  return true;
}

// The group's weights (w + OW_OP) and its oneDNN convolution. False when depthwise members
// disagree on a shared channel's kernel or oneDNN refuses the shape.
bool build(Group& g, const std::vector<ConvTask>& convs, const std::vector<std::vector<uint8_t>>& weights) {
  const int64_t cg = g.depthwise ? 1 : g.C, kk = g.KH * g.KW;
  Tensor w = Tensor::empty(DType::i8, {g.M, cg, g.KH, g.KW});  // zero-filled: channels no member covers
  int8_t* wd = w.data<int8_t>();
  std::vector<bool> set(static_cast<size_t>(g.M), false);
  for (size_t i = 0; i < g.members.size(); ++i) {
    const ConvTask& t = convs[g.members[i]];
    const std::vector<uint8_t>& wb = weights[g.members[i]];
    for (int64_t k = 0; k < t.stored(); ++k) {
      const int64_t K = g.kernel0[i] + k;
      const bool first = !set[static_cast<size_t>(K)];
      set[static_cast<size_t>(K)] = true;
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t ky = 0; ky < g.KH; ++ky)
          for (int64_t kx = 0; kx < g.KW; ++kx) {
            const int8_t v = static_cast<int8_t>(static_cast<int8_t>(wb[t.weight_index(k, c, ky, kx)]) + t.ow_op);  // eligible(): fits
            int8_t& d = wd[(K * cg + c) * kk + ky * g.KW + kx];
            if (first) d = v;
            else if (d != v) return false;
          }
    }
  }
  g.wsum.assign(static_cast<size_t>(g.M), 0);
  for (int64_t k = 0; k < g.M; ++k)
    for (int64_t i = 0; i < cg * kk; ++i) g.wsum[static_cast<size_t>(k)] += wd[k * cg * kk + i];
  ops::ConvParams cp;
  cp.strides = {g.sy, g.sx};
  cp.dilations = {1, 1};
  cp.pads = {g.pad_top, g.pad_left, g.pad_bottom, g.pad_right};
  cp.group = g.depthwise ? g.C : 1;
  auto a = ops::make_qconv_accumulator({1, g.C, g.crop_h, g.crop_w}, DType::i8, g.pad, w, cp, {1, g.M, g.OH, g.OW});
  if (!a.ok()) return false;
  g.acc = std::move(a).value();
  g.out = Tensor::empty(DType::i32, {1, g.OH, g.OW, g.M});
  return true;
}

// The chain as planned: the same tasks and weight bytes. Weights are compared byte for byte
// unless the memory's change record shows nothing wrote to them since the last match.
bool same_chain(SimCache::Chain& ch, DeviceMemory& mem, const std::vector<ChainTask>& tasks, const std::vector<ConvTask>& convs, bool same_tasks) {
  if (ch.addresses.size() != tasks.size()) return false;
  const bool tracked = ch.memory == mem.identity();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!same_tasks && (ch.addresses[i] != tasks[i].address || ch.regs[i] != tasks[i].values)) return false;
    if (tracked && !mem.written_since(ch.checked_at, convs[i].weights, static_cast<size_t>(convs[i].weight_bytes))) continue;
    auto wb = mem.read(convs[i].weights, static_cast<size_t>(convs[i].weight_bytes));
    if (!wb.ok() || wb->size() != ch.weights[i].size() || std::memcmp(wb->data(), ch.weights[i].data(), wb->size()) != 0) return false;
  }
  ch.memory = mem.identity();
  ch.checked_at = mem.sequence();
  return true;
}

}  // namespace

SimCache::Chain* plan_chain(SimCache& cache, DeviceMemory& mem, const std::vector<ChainTask>& tasks, const std::vector<ConvTask>& convs,
                            bool same_tasks) {
  if (tasks.empty()) return nullptr;
  auto& slot = cache.chains[tasks[0].address];
  if (slot && same_chain(*slot, mem, tasks, convs, same_tasks)) return slot.get();
  slot.reset();
  auto ch = std::make_shared<SimCache::Chain>();
  const size_t n = tasks.size();
  for (size_t i = 0; i < n; ++i) {
    auto wb = mem.read(convs[i].weights, static_cast<size_t>(convs[i].weight_bytes));
    if (!wb.ok()) return nullptr;  // the task reports it when it runs
    ch->addresses.push_back(tasks[i].address);
    ch->regs.push_back(tasks[i].values);
    ch->weights.emplace_back(wb->begin(), wb->end());
  }
  // Weights are prepared once: no task may write over any task's weights.
  for (const ConvTask& a : convs)
    for (const ConvTask& b : convs) {
      if (overlap(a.output, end_of(a.output, a.output_bytes), b.weights, end_of(b.weights, b.weight_bytes))) return nullptr;
    }
  ch->group_of.assign(n, -1);
  ch->member.assign(n, 0);
  std::vector<detail::Group> groups;
  for (size_t i = 0; i < n; ++i) {
    if (!eligible(convs[i], ch->weights[i])) continue;
    bool placed = false;
    for (auto& g : groups) {
      if (!compatible(convs[g.members.front()], convs[i])) continue;
      detail::Group trial;
      trial.members = g.members;
      trial.members.push_back(i);
      if (layout(trial, convs) && input_stays(trial, convs)) {
        g = std::move(trial);
        placed = true;
        break;
      }
    }
    if (placed) continue;
    detail::Group single;
    single.members = {i};
    if (layout(single, convs) && input_stays(single, convs)) groups.push_back(std::move(single));
  }
  for (auto& g : groups) {
    if (build(g, convs, ch->weights)) {
      ch->groups.push_back(std::move(g));
      continue;
    }
    for (size_t m : g.members) {  // members that disagree: each on its own
      detail::Group single;
      single.members = {m};
      if (layout(single, convs) && build(single, convs, ch->weights)) ch->groups.push_back(std::move(single));
    }
  }
  for (size_t gi = 0; gi < ch->groups.size(); ++gi)
    for (size_t i = 0; i < ch->groups[gi].members.size(); ++i) {
      ch->group_of[ch->groups[gi].members[i]] = static_cast<int>(gi);
      ch->member[ch->groups[gi].members[i]] = i;
    }
  ch->memory = mem.identity();
  ch->checked_at = mem.sequence();
  slot = std::move(ch);
  return slot.get();
}

void new_run(SimCache::Chain& chain) {
  ++chain.run;
  chain.mac_runs = 0;
}

size_t mac_runs(const SimCache::Chain& chain) { return chain.mac_runs; }

Result<std::optional<MacView>> chain_mac(SimCache::Chain& ch, DeviceMemory& mem, size_t i) {
  const int gi = ch.group_of[i];
  if (gi < 0) return std::optional<MacView>();
  Group& g = ch.groups[static_cast<size_t>(gi)];
  if (g.done != ch.run) {
    auto src = mem.read(static_cast<uint32_t>(g.lo), static_cast<size_t>(g.hi - g.lo));
    if (!src.ok()) return std::optional<MacView>();
    // NC1HWC2 -> oneDNN's padded channels-last uint8 (x + 128 = x ^ 0x80) for the rows and
    // columns the taps reach: 16 channels per copy, rows on the math threads.
    uint8_t* buf = g.acc->padded_input();
    const uint8_t* in = src->data();
    const int64_t padded_w = g.crop_w + g.pad_left + g.pad_right, c1s = g.C / 16, crop_w = g.crop_w, C = g.C, S = g.surface, L = g.line;
    const int64_t pad_top = g.pad_top, pad_left = g.pad_left;
    ops::math_parallel_for(g.crop_h, g.crop_h * g.crop_w * g.C, [=](int64_t h) {
      constexpr uint64_t kFlip = 0x8080808080808080ull;
      for (int64_t c1 = 0; c1 < c1s; ++c1) {
        const uint8_t* s = in + c1 * S + h * L;
        uint8_t* d = buf + ((pad_top + h) * padded_w + pad_left) * C + c1 * 16;
        for (int64_t w = 0; w < crop_w; ++w) {  // 16 bytes as two 64-bit words
          uint64_t lo, hi;
          std::memcpy(&lo, s + w * 16, 8);
          std::memcpy(&hi, s + w * 16 + 8, 8);
          lo ^= kFlip;
          hi ^= kFlip;
          std::memcpy(d + w * C, &lo, 8);
          std::memcpy(d + w * C + 8, &hi, 8);
        }
      }
    });
    RKD_TRY(g.acc->run_filled_raw(g.out));
    g.done = ch.run;
    ++ch.mac_runs;
  }
  const size_t m = ch.member[i];
  const int64_t at = g.acc_offset[m];
  return std::optional<MacView>(MacView{g.out.data<int32_t>() + at, g.M, g.out.numel() - at, g.wsum.data() + g.kernel0[m], -128});
}

}  // namespace detail

}  // namespace rkd::npu::sim
