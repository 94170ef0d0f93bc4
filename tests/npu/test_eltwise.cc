// The element-wise Add as a DPU-only task: lowered (npu/lower/eltwise.h), encoded as regcmd,
// executed by the simulator from device memory, against the int64 definition of the NPU's
// arithmetic (quant::rknpu_add_plan) bit for bit on every pair of input codes, that
// definition against the real sum rounded once (double), and against ONNX Runtime's
// QLinearAdd arithmetic (onnx_float) - the bound the 15-bit multipliers leave.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "npu/arch/arch.h"
#include "npu/lower/eltwise.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/sim.h"
#include "quant/int8.h"

namespace rkd::npu {
namespace {

// Every (a, b) code pair, once each, in a [1, 17, 61, 64] map (17 channels: a partly used
// second channel block; the last 832 elements repeat the first pairs).
void all_pairs(DType t, Tensor& a, Tensor& b) {
  a = Tensor::empty(t, {1, 17, 61, 64});
  b = Tensor::empty(t, {1, 17, 61, 64});
  auto* pa = static_cast<uint8_t*>(a.raw());
  auto* pb = static_cast<uint8_t*>(b.raw());
  for (int64_t i = 0; i < a.numel(); ++i) {
    pa[i] = static_cast<uint8_t>(i & 255);
    pb[i] = static_cast<uint8_t>((i >> 8) & 255);
  }
}

Result<Tensor> simulate_add(const lower::AddSpec& s, const Tensor& a, const Tensor& b, const sim::Quirks& q = {}) {
  DeviceMemory mem;
  RKD_ASSIGN(lower::LoweredEltwise l, lower::lower_add(s, mem));
  RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l.tasks));
  RKD_TRY(lower::write_add_inputs(mem, s, l, a, b));
  RKD_ASSIGN(auto stats, sim::run(mem, placed.address, placed.spans[0].word_count, q));
  if (stats.size() != 1) return invalid("expected one task");
  Tensor y = Tensor::empty(s.dtype, {1, s.C, s.H, s.W});
  RKD_TRY(lower::gather_eltwise_output(mem, s, l, y));
  return y;
}

struct Scales {
  float a, b, out;
  int32_t za, zb, zo;
};

TEST(NpuEltwise, AddTaskEqualsTheNpuDefinitionOnEveryPairOfCodes) {
  // Scale sets: b's larger (the operands swap), a's larger, equal, a ratio of 1000 (the EW
  // converter's shift far above 14), an output scale far below the inputs'.
  const Scales sets[] = {{0.02f, 0.05f, 0.06f, 3, -7, 1},
                         {0.11f, 0.013f, 0.09f, -20, 5, -3},
                         {0.04f, 0.04f, 0.05f, 0, 0, 0},
                         {0.5f, 0.0005f, 0.4f, 10, -100, 7},
                         {0.03f, 0.02f, 0.002f, -1, 2, 0}};
  int64_t n = 0, off_real = 0, off_ort = 0, worst_ort = 0;
  for (DType t : {DType::i8, DType::u8}) {
    Tensor a, b;
    all_pairs(t, a, b);
    for (const Scales& sc : sets) {
      lower::AddSpec s;
      s.dtype = t;
      s.C = 17;
      s.H = 61;
      s.W = 64;
      const int32_t shift = t == DType::u8 ? 128 : 0, lo = t == DType::u8 ? 0 : -128, hi = t == DType::u8 ? 255 : 127;
      s.q = quant::QBinaryParams{sc.a, sc.b, sc.out, sc.za + shift, sc.zb + shift, sc.zo + shift, lo, hi, quant::Requant::rknpu_out_cvt};
      auto y = simulate_add(s, a, b);
      ASSERT_TRUE(y.ok()) << y.error().to_string();
      Tensor want = Tensor::empty(t, a.shape()), ort = Tensor::empty(t, a.shape());
      ASSERT_TRUE(quant::tflite_add(a, b, s.q, false, want).ok());
      quant::QBinaryParams po = s.q;
      po.convention = quant::Requant::onnx_float;
      ASSERT_TRUE(quant::tflite_add(a, b, po, false, ort).ok());
      auto plan = quant::rknpu_add_plan(s.q);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(plan->b_is_main, sc.b > sc.a);
      for (int64_t i = 0; i < a.numel(); ++i) {
        const int64_t got = static_cast<int64_t>(y->get_as_double(i)), def = static_cast<int64_t>(want.get_as_double(i));
        ASSERT_EQ(got, def) << "element " << i << " a " << a.get_as_double(i) << " b " << b.get_as_double(i) << " scales " << sc.a << " " << sc.b;
        // The definition against the real sum: equal unless the real value lies within the
        // multipliers' error of a rounding tie (15-bit S_e and S_o, the EW converter's half
        // step of 2^-14 main steps).
        const double ma = static_cast<double>(sc.a) / sc.out, mb = static_cast<double>(sc.b) / sc.out;
        const double da = a.get_as_double(i) - s.q.a_zero_point, db = b.get_as_double(i) - s.q.b_zero_point;
        const double real = ma * da + mb * db, bound = std::ldexp(std::abs(ma * da) + std::abs(mb * db) + std::max(ma, mb), -13);
        const double rounded = std::clamp(std::nearbyint(real) + s.q.out_zero_point, static_cast<double>(lo), static_cast<double>(hi));
        if (static_cast<double>(def) != rounded) {
          ++off_real;
          const double tie = std::floor(real) + 0.5;
          ASSERT_LT(std::abs(real - tie), bound) << "element " << i << ": " << def << " vs " << rounded << " (real " << real << ")";
          ASSERT_LE(std::abs(static_cast<double>(def) - rounded), 1.0);
        }
        const int64_t d = std::llabs(def - static_cast<int64_t>(ort.get_as_double(i)));
        off_ort += d != 0;
        worst_ort = std::max(worst_ort, d);
        ++n;
      }
    }
  }
  std::printf("npu add: %lld values; %lld (%.4f%%) differ from the real sum rounded once, %lld (%.4f%%) from onnx_float, max %lld\n",
              static_cast<long long>(n), static_cast<long long>(off_real), 100.0 * static_cast<double>(off_real) / static_cast<double>(n),
              static_cast<long long>(off_ort), 100.0 * static_cast<double>(off_ort) / static_cast<double>(n), static_cast<long long>(worst_ort));
  EXPECT_LE(worst_ort, 1);
}

// Sub (EW_ALU_ALGO 4: main - EW operand, a always main), Max and Min (0 and 1) on every pair
// of codes, and all four ALU operations (Add too) with b one value per channel or one element
// (EW_DATA_MODE 0; a main whatever the scales): the simulated task (stage by stage, then
// through the look-up path with a cache) equals the int8 reference's rknpu_out_cvt definition
// (quant::qdq_binary) bit for bit, and differs from ONNX Runtime's arithmetic (its QLinearAdd;
// the float32 DequantizeLinear -> op -> QuantizeLinear for the others) by at most one step.
TEST(NpuEltwise, AluTasksEqualTheNpuDefinitionPerElementPerChannelAndForOneValue) {
  const Scales sets[] = {{0.02f, 0.05f, 0.06f, 3, -7, 1},     // b's scale larger: a Sub halves K
                         {0.11f, 0.013f, 0.09f, -20, 5, -3},  // a's larger
                         {0.001f, 0.5f, 0.4f, 10, -100, 7},   // b's 500x a's: K far below 2^14
                         {0.03f, 0.02f, 0.002f, -1, 2, 0}};   // output scale far below the inputs'
  std::mt19937 rng(5);
  for (quant::BinaryAlu alu : {quant::BinaryAlu::add, quant::BinaryAlu::sub, quant::BinaryAlu::max, quant::BinaryAlu::min}) {
    int64_t n = 0, off_ort = 0, worst_ort = 0;
    for (lower::BOperand kind : {lower::BOperand::map, lower::BOperand::per_channel, lower::BOperand::scalar}) {
      if (alu == quant::BinaryAlu::add && kind == lower::BOperand::map) continue;  // AddTaskEqualsTheNpuDefinitionOnEveryPairOfCodes
      for (DType t : {DType::i8, DType::u8}) {
        Tensor a, b;
        all_pairs(t, a, b);
        if (kind != lower::BOperand::map) {
          b = Tensor::empty(t, kind == lower::BOperand::scalar ? Shape{1} : Shape{1, 17, 1, 1});
          for (int64_t i = 0; i < b.numel(); ++i) static_cast<uint8_t*>(b.raw())[i] = static_cast<uint8_t>(rng());
        }
        for (const Scales& sc : sets) {
          const std::string what = std::string(quant::to_string(alu)) + (kind == lower::BOperand::map ? "" : " broadcast") + " scales " +
                                   std::to_string(sc.a) + " " + std::to_string(sc.b);
          lower::AddSpec s;
          s.dtype = t;
          s.C = 17;
          s.H = 61;
          s.W = 64;
          s.alu = alu;
          s.b = kind;
          const int32_t shift = t == DType::u8 ? 128 : 0, lo = t == DType::u8 ? 0 : -128, hi = t == DType::u8 ? 255 : 127;
          s.q = quant::QBinaryParams{sc.a, sc.b, sc.out, sc.za + shift, sc.zb + shift, sc.zo + shift, lo, hi, quant::Requant::rknpu_out_cvt};
          DeviceMemory mem;
          auto l = lower::lower_add(s, mem);
          ASSERT_TRUE(l.ok()) << what << ": " << l.error().to_string();
          auto placed = lower::place_regcmd(mem, l->tasks);
          ASSERT_TRUE(placed.ok());
          ASSERT_TRUE(lower::write_add_inputs(mem, s, *l, a, b).ok()) << what;
          Tensor want = Tensor::empty(t, a.shape()), ort = Tensor::empty(t, a.shape());
          ASSERT_TRUE(quant::qdq_binary(a, b, s.q, alu, want).ok());
          quant::QBinaryParams po = s.q;
          po.convention = quant::Requant::onnx_float;
          ASSERT_TRUE((alu == quant::BinaryAlu::add ? quant::tflite_add(a, b, po, false, ort) : quant::qdq_binary(a, b, po, alu, ort)).ok());
          sim::SimCache cache;
          for (sim::SimCache* c : {static_cast<sim::SimCache*>(nullptr), &cache, &cache}) {
            auto stats = sim::run(mem, placed->address, placed->spans[0].word_count, {}, c);
            ASSERT_TRUE(stats.ok()) << stats.error().to_string();
            Tensor y = Tensor::empty(t, a.shape());
            ASSERT_TRUE(lower::gather_eltwise_output(mem, s, *l, y).ok());
            ASSERT_EQ(std::memcmp(y.raw(), want.raw(), y.nbytes()), 0) << what;
          }
          for (int64_t i = 0; i < a.numel(); ++i) {
            const int64_t d = std::llabs(static_cast<int64_t>(want.get_as_double(i)) - static_cast<int64_t>(ort.get_as_double(i)));
            off_ort += d != 0;
            worst_ort = std::max(worst_ort, d);
            ++n;
          }
        }
      }
    }
    std::printf("npu %s: %lld values equal to the NPU definition; %lld (%.4f%%) differ from onnx_float, max %lld\n", quant::to_string(alu),
                static_cast<long long>(n), static_cast<long long>(off_ort), 100.0 * static_cast<double>(off_ort) / static_cast<double>(n),
                static_cast<long long>(worst_ort));
    EXPECT_LE(worst_ort, 1) << quant::to_string(alu);
  }
}

Result<Tensor> simulate_mul(const lower::MulSpec& s, const Tensor& a, const Tensor& b, const sim::Quirks& q = {}, sim::SimCache* cache = nullptr) {
  DeviceMemory mem;
  RKD_ASSIGN(lower::LoweredEltwise l, lower::lower_mul(s, mem));
  RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l.tasks));
  RKD_TRY(lower::write_mul_inputs(mem, s, l, a, b));
  for (int rep = 0; rep < (cache ? 2 : 1); ++rep) {  // with a cache: the second run reads the decoded task (its table)
    RKD_ASSIGN(auto stats, sim::run(mem, placed.address, placed.spans[0].word_count, q, cache));
    if (stats.size() != 1) return invalid("expected one task");
  }
  Tensor y = Tensor::empty(s.dtype, {1, s.C, s.H, s.W});
  RKD_TRY(lower::gather_eltwise_output(mem, s, l, y));
  return y;
}

// The Mul task (EW_OP_TYPE 1) on every pair of codes, per element, and with one value per
// channel (EW_DATA_MODE 0) or one for the map, against the int8 reference's rknpu_out_cvt
// definition bit for bit (stage by stage and through the look-up path), and the bound against
// ONNX Runtime's QLinearMul arithmetic (onnx_float).
TEST(NpuEltwise, MulTaskEqualsTheNpuDefinitionPerElementPerChannelAndForOneValue) {
  const Scales sets[] = {{0.02f, 0.05f, 0.06f, 3, -7, 1}, {0.11f, 1.0f / 255, 0.09f, -20, -128, -3}, {0.3f, 0.2f, 0.002f, 0, 0, 0}};
  int64_t n = 0, off_ort = 0, worst_ort = 0;
  std::mt19937 rng(3);
  for (DType t : {DType::i8, DType::u8}) {
    Tensor a, b;
    all_pairs(t, a, b);
    const int32_t shift = t == DType::u8 ? 128 : 0, lo = t == DType::u8 ? 0 : -128, hi = t == DType::u8 ? 255 : 127;
    for (const Scales& sc : sets) {
      const quant::QBinaryParams q{sc.a, sc.b, sc.out, sc.za + shift, sc.zb + shift, sc.zo + shift, lo, hi, quant::Requant::rknpu_out_cvt};
      // Per element over every pair; then a 40-channel map of 3 x 3 cells (three channel
      // blocks, the last partly used) by a [1, 40, 1, 1] and by a one-element operand.
      for (auto kind : {lower::MulSpec::Operand::map, lower::MulSpec::Operand::per_channel, lower::MulSpec::Operand::scalar}) {
        lower::MulSpec s;
        s.dtype = t;
        s.q = q;
        s.b = kind;
        Tensor x = a, v = b;
        if (kind != lower::MulSpec::Operand::map) {
          static_cast<lower::MapShape&>(s) = lower::MapShape{t, 40, 3, 3};
          x = Tensor::empty(t, {1, 40, 3, 3});
          v = Tensor::empty(t, kind == lower::MulSpec::Operand::scalar ? Shape{1} : Shape{1, 40, 1, 1});
          for (Tensor* p : {&x, &v}) {
            auto* d = static_cast<uint8_t*>(p->raw());
            for (int64_t i = 0; i < p->numel(); ++i) d[i] = static_cast<uint8_t>(rng());
          }
        } else {
          static_cast<lower::MapShape&>(s) = lower::MapShape{t, 17, 61, 64};
        }
        sim::SimCache cache;
        auto y = simulate_mul(s, x, v), yc = simulate_mul(s, x, v, {}, &cache);
        ASSERT_TRUE(y.ok()) << y.error().to_string();
        ASSERT_TRUE(yc.ok()) << yc.error().to_string();
        Tensor want = Tensor::empty(t, x.shape()), ort = Tensor::empty(t, x.shape());
        ASSERT_TRUE(quant::tflite_mul(x, v, s.q, want).ok());
        quant::QBinaryParams po = s.q;
        po.convention = quant::Requant::onnx_float;
        ASSERT_TRUE(quant::tflite_mul(x, v, po, ort).ok());
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t def = static_cast<int64_t>(want.get_as_double(i));
          ASSERT_EQ(static_cast<int64_t>(y->get_as_double(i)), def) << "element " << i << " kind " << static_cast<int>(kind);
          ASSERT_EQ(static_cast<int64_t>(yc->get_as_double(i)), def) << "look-up path, element " << i;
          const int64_t d = std::llabs(def - static_cast<int64_t>(ort.get_as_double(i)));
          off_ort += d != 0;
          worst_ort = std::max(worst_ort, d);
          ++n;
        }
      }
    }
  }
  std::printf("npu mul: %lld values; %lld (%.4f%%) differ from onnx_float, max %lld\n", static_cast<long long>(n), static_cast<long long>(off_ort),
              100.0 * static_cast<double>(off_ort) / static_cast<double>(n), static_cast<long long>(worst_ort));
  EXPECT_LE(worst_ort, 1);
  // The simulator refuses an operand whose data mode registers disagree.
}

// Device-memory chaining at the lowering: a table task reading the previous table task's
// output in place (InputsAt) allocates no input, and the two tasks compose; chainable() refuses
// a layout the reader would allocate otherwise (an EW operand of a map under 12 pixels).
TEST(NpuEltwise, ChainedInputIsReadInPlaceFromTheProducersOutput) {
  for (DType t : {DType::i8, DType::u8}) {
    lower::LutSpec a, b;
    static_cast<lower::MapShape&>(a) = lower::MapShape{t, 40, 5, 7};
    static_cast<lower::MapShape&>(b) = a;
    const int lo = t == DType::u8 ? 0 : -128;
    for (int i = 0; i < 256; ++i) {
      a.table.push_back(lo + (i * 7 + 3) % 256);
      b.table.push_back(lo + 255 - i);
    }
    DeviceMemory mem;
    auto la = lower::lower_lut(a, mem);
    ASSERT_TRUE(la.ok()) << la.error().to_string();
    DeviceMemory scratch;
    auto probe = lower::lower_lut(b, scratch);
    ASSERT_TRUE(probe.ok());
    ASSERT_EQ(probe->input_maps.size(), 1u);
    ASSERT_TRUE(lower::chainable(la->output_maps[0], probe->input_maps[0][0]));
    auto lb = lower::lower_lut(b, mem, {la->output_maps[0].address});
    ASSERT_TRUE(lb.ok()) << lb.error().to_string();
    EXPECT_TRUE(lb->input_maps[0][0].chained);
    EXPECT_EQ(lb->main_address, la->output_address);
    for (const auto& buf : lb->buffers) EXPECT_NE(buf.kind, npu::lower::BufferKind::input);
    Tensor x = Tensor::empty(t, {1, 40, 5, 7});
    auto* px = static_cast<uint8_t*>(x.raw());
    for (int64_t i = 0; i < x.numel(); ++i) px[i] = static_cast<uint8_t>(i * 31 + 5);
    ASSERT_TRUE(lower::write_eltwise_input(mem, *la, 0, x).ok());
    for (const auto* l : {&*la, &*lb}) {
      auto placed = lower::place_regcmd(mem, l->tasks);
      ASSERT_TRUE(placed.ok());
      auto st = sim::run(mem, placed->address, placed->spans[0].word_count, {});
      ASSERT_TRUE(st.ok()) << st.error().to_string();
    }
    Tensor y = Tensor::empty(t, {1, 40, 5, 7});
    ASSERT_TRUE(lower::read_eltwise_output(mem, *lb, 0, y).ok());
    const auto* py = static_cast<const uint8_t*>(y.raw());
    const int flip = t == DType::i8 ? 128 : 0;  // the tables' index: the code (uint8) or code + 128
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int first = a.table[static_cast<size_t>((px[i] + flip) & 255)];
      const int want = b.table[static_cast<size_t>((first - lo) & 255)];
      ASSERT_EQ(static_cast<int>(t == DType::i8 ? static_cast<int8_t>(py[i]) : py[i]), want) << "element " << i;
    }
  }
  // An EW operand of a 3 x 3 map has 12-pixel surfaces: a dense 3 x 3 output is not it.
  lower::AddSpec s;
  static_cast<lower::MapShape&>(s) = lower::MapShape{DType::i8, 16, 3, 3};
  s.q = quant::QBinaryParams{0.02f, 0.01f, 0.03f, 0, 0, 0, -128, 127, quant::Requant::rknpu_out_cvt};
  DeviceMemory scratch;
  auto add = lower::lower_add(s, scratch);
  ASSERT_TRUE(add.ok());
  const lower::DeviceMap dense{0, 9 * 16, 16, lower::MapShape{DType::i8, 16, 3, 3}, false};
  EXPECT_TRUE(lower::chainable(dense, add->input_maps[0][0]));   // a: the main input, dense
  EXPECT_FALSE(lower::chainable(dense, add->input_maps[1][0]));  // b: the EW operand
}

TEST(NpuEltwise, LookUpPathEqualsTheStageByStageDefinition) {
  // The cached path (sim::run with a SimCache: the task as a table of (x, e)) against the
  // definition (no cache), byte for byte over the whole device memory, for Add and LeakyRelu,
  // both types, every knob that changes a stage.
  Tensor a, b;
  for (DType t : {DType::i8, DType::u8}) {
    all_pairs(t, a, b);
    const int32_t shift = t == DType::u8 ? 128 : 0, lo = t == DType::u8 ? 0 : -128, hi = t == DType::u8 ? 255 : 127;
    for (const char* knob : {"ew_mode=integer", "ew_mode=float", "bs_shift_rounding=truncate", "out_cvt_rounding=half_away"}) {
      sim::Quirks q;
      ASSERT_TRUE(sim::set_knob(q, knob).ok());
      for (int op = 0; op < 2; ++op) {
        DeviceMemory m1, m2;
        lower::AddSpec as;
        lower::LeakyReluSpec ls;
        static_cast<lower::MapShape&>(as) = lower::MapShape{t, 17, 61, 64};
        static_cast<lower::MapShape&>(ls) = lower::MapShape{t, 17, 61, 64};
        as.q = quant::QBinaryParams{0.02f, 0.05f, 0.06f, 3 + shift, -7 + shift, 1 + shift, lo, hi, quant::Requant::rknpu_out_cvt};
        ls.x_scale = 0.07;
        ls.y_scale = 0.03;
        ls.alpha = 0.1;
        ls.x_zero_point = 12 + shift;
        ls.y_zero_point = -30 + shift;
        std::vector<uint8_t> bytes[2];
        for (int path = 0; path < 2; ++path) {
          DeviceMemory& mem = path ? m2 : m1;
          auto l = op == 0 ? lower::lower_add(as, mem) : lower::lower_leaky_relu(ls, mem);
          ASSERT_TRUE(l.ok()) << l.error().to_string();
          auto placed = lower::place_regcmd(mem, l->tasks);
          ASSERT_TRUE(placed.ok());
          ASSERT_TRUE((op == 0 ? lower::write_add_inputs(mem, as, *l, a, b) : lower::write_leaky_relu_input(mem, ls, *l, a)).ok());
          sim::SimCache cache;
          for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the decoded task and its table
            auto st = sim::run(mem, placed->address, placed->spans[0].word_count, q, path ? &cache : nullptr);
            ASSERT_TRUE(st.ok()) << st.error().to_string();
          }
          if (path) {
            EXPECT_EQ(cache.last_tasks, 1u);  // the cached (look-up) path ran
          }
          auto all = mem.read(mem.base(), mem.size());
          ASSERT_TRUE(all.ok());
          bytes[path].assign(all->begin(), all->end());
        }
        EXPECT_EQ(bytes[0], bytes[1]) << knob << (op == 0 ? " Add" : " LeakyRelu");
      }
    }
  }
}

TEST(NpuEltwise, EwFloatKnobChangesOnlyTheConverterStep) {
  // The disputed EW arithmetic (ew_mode=float): the task still runs, every value within one
  // step of the integer converter's.
  Tensor a, b;
  all_pairs(DType::i8, a, b);
  lower::AddSpec s;
  s.C = 17;
  s.H = 61;
  s.W = 64;
  s.q = quant::QBinaryParams{0.02f, 0.05f, 0.06f, 3, -7, 1, -128, 127, quant::Requant::rknpu_out_cvt};
  sim::Quirks q;
  ASSERT_TRUE(sim::set_knob(q, "ew_mode=float").ok());
  auto yi = simulate_add(s, a, b), yf = simulate_add(s, a, b, q);
  ASSERT_TRUE(yi.ok() && yf.ok());
  int64_t differ = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(yi->get_as_double(i) - yf->get_as_double(i));
    ASSERT_LE(d, 1.0);
    differ += d != 0;
  }
  std::printf("npu add, ew_mode=float: %lld of %lld values differ from the integer converter's\n", static_cast<long long>(differ),
              static_cast<long long>(a.numel()));
}

TEST(NpuEltwise, LeakyReluTaskEqualsTheNpuTableOnEveryCode) {
  // Every code of a [1, 17, 4, 4] map (17 channels, 16 pixels: 272 values, all 256 codes),
  // 3 scale pairs x 4 alphas x both types: the simulated task equals quant's table bit for bit;
  // the table equals the real function rounded once except within the multipliers' error of a
  // tie; against the float reference table (what onnx_float's QLinearLut holds) at most one step.
  const double alphas[] = {0.01, 0.1, 0.2, 0.5};
  const double scales[][2] = {{0.05, 0.05}, {0.11, 0.03}, {0.02, 0.09}};
  int64_t n = 0, off = 0;
  for (DType t : {DType::i8, DType::u8}) {
    const int32_t lo = t == DType::u8 ? 0 : -128, hi = t == DType::u8 ? 255 : 127;
    for (const auto& sc : scales)
      for (double alpha : alphas) {
        lower::LeakyReluSpec s;
        s.dtype = t;
        s.C = 17;
        s.H = 4;
        s.W = 4;
        s.x_scale = sc[0];
        s.y_scale = sc[1];
        s.alpha = alpha;
        s.x_zero_point = lo + 100;
        s.y_zero_point = lo + 140;
        Tensor x = Tensor::empty(t, {1, 17, 4, 4});
        for (int64_t i = 0; i < x.numel(); ++i) static_cast<uint8_t*>(x.raw())[i] = static_cast<uint8_t>(i & 255);
        DeviceMemory mem;
        auto l = lower::lower_leaky_relu(s, mem);
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        EXPECT_EQ(l->ew_address, l->main_address);  // 16 pixels: one buffer read twice
        auto placed = lower::place_regcmd(mem, l->tasks);
        ASSERT_TRUE(placed.ok());
        ASSERT_TRUE(lower::write_leaky_relu_input(mem, s, *l, x).ok());
        auto st = sim::run(mem, placed->address, placed->spans[0].word_count, {});
        ASSERT_TRUE(st.ok()) << st.error().to_string();
        Tensor y = Tensor::empty(t, x.shape());
        ASSERT_TRUE(lower::gather_eltwise_output(mem, s, *l, y).ok());
        auto table = quant::rknpu_leaky_relu_table(t, s.x_scale, s.x_zero_point, s.y_scale, s.y_zero_point, alpha);
        ASSERT_TRUE(table.ok());
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t code = static_cast<int64_t>(x.get_as_double(i));
          ASSERT_EQ(y.get_as_double(i), table->get_as_double(code - lo)) << "code " << code << " alpha " << alpha;
        }
        for (int32_t c = lo; c <= hi; ++c) {
          const double dx = c - s.x_zero_point, real = s.x_scale / s.y_scale * (dx >= 0 ? dx : alpha * dx);
          const double want = std::clamp(std::nearbyint(real) + s.y_zero_point, static_cast<double>(lo), static_cast<double>(hi));
          const double got = table->get_as_double(c - lo);
          ++n;
          if (got == want) continue;
          ++off;
          ASSERT_LE(std::abs(got - want), 1.0);
          ASSERT_LT(std::abs(real - (std::floor(real) + 0.5)), std::ldexp(std::abs(real) + s.x_scale / s.y_scale, -13)) << "code " << c;
        }
      }
  }
  std::printf("npu LeakyRelu: %lld of %lld table entries differ from the real function rounded once\n", static_cast<long long>(off),
              static_cast<long long>(n));
  // alpha outside (0, 1) is refused by name.
  lower::LeakyReluSpec bad;
  bad.C = bad.H = bad.W = 4;
  bad.x_scale = bad.y_scale = 0.1;
  bad.alpha = 1.5;
  const Status st = lower::check_leaky_relu(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("alpha"), std::string::npos);
}

TEST(NpuEltwise, RefusesWhatTheDpuTaskCannotTakeByRule) {
  lower::EltwiseGeometry g;
  g.C = 16;
  g.H = 8;
  g.W = 8;
  EXPECT_TRUE(lower::check_eltwise(g).empty());
  auto first = [](const lower::EltwiseGeometry& x) {
    const auto v = lower::check_eltwise(x);
    return v.empty() ? std::string() : v[0].text();
  };
  lower::EltwiseGeometry x = g;
  x.broadcast = true;  // a row or a column
  EXPECT_NE(first(x).find("a broadcast operand (a row or a column): operands of one shape"), std::string::npos) << first(x);
  x.per_channel_operand = true;  // one value per channel (or one element): EW_DATA_MODE 0
  EXPECT_TRUE(lower::check_eltwise(x).empty()) << first(x);
  // The one predicate the planner and the runtime's spec ask.
  const std::vector<int64_t> map{1, 24, 5, 7};
  EXPECT_TRUE(lower::per_channel_operand(map, {1, 24, 1, 1}));
  EXPECT_TRUE(lower::per_channel_operand(map, {24, 1, 1}));
  EXPECT_TRUE(lower::per_channel_operand(map, {1}));
  EXPECT_TRUE(lower::per_channel_operand(map, {1, 1, 1, 1}));
  EXPECT_FALSE(lower::per_channel_operand(map, {1, 24, 5, 1}));  // a column per channel
  EXPECT_FALSE(lower::per_channel_operand(map, {1, 1, 1, 7}));   // a row
  EXPECT_FALSE(lower::per_channel_operand(map, {2, 24, 1, 1}));
  x = g;
  x.batch = 2;
  EXPECT_NE(first(x).find("batch 2"), std::string::npos);
  x = g;
  x.W = static_cast<int64_t>(arch::DPU_DATA_CUBE_WIDTH_WIDTH.max()) + 2;
  EXPECT_NE(first(x).find("DPU.DATA_CUBE_WIDTH.WIDTH is 13 bits wide"), std::string::npos) << first(x);
  x.W = x.W - 1;
  EXPECT_TRUE(lower::check_eltwise(x).empty());
  x = g;
  x.dtype = DType::f32;
  EXPECT_FALSE(lower::check_eltwise(x).empty());
  // docs/npu.md's table is the list, rule and reason.
  std::ifstream f(std::string(RKD_SOURCE_DIR) + "/docs/npu.md");
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const auto& [rule, reason] : lower::eltwise_rules()) {
    EXPECT_NE(doc.find("| " + rule + " | " + reason + " |"), std::string::npos) << "docs/npu.md lacks the row: | " << rule << " | " << reason << " |";
  }
  // A scale ratio the EW converter cannot hold (shift above 63) is refused by check_add.
  lower::AddSpec s;
  s.C = 16;
  s.H = 4;
  s.W = 4;
  s.q = quant::QBinaryParams{1.0f, 1e-20f, 1.0f, 0, 0, 0, -128, 127, quant::Requant::rknpu_out_cvt};
  const Status st = lower::check_add(s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind, ErrorKind::unsupported);
  EXPECT_NE(st.error().message.find("EW converter"), std::string::npos) << st.error().message;
}

TEST(NpuEltwise, ConcatCopyTasksPlaceEveryPartAtItsChannelOffset) {
  // Parts of 16, 32 and 21 channels (the last partly fills its block; only the last may),
  // every code in every part: the output is the concatenation byte for byte, on the stage-by-
  // stage path and on the look-up path, both types, under the knobs that change a stage.
  for (DType t : {DType::i8, DType::u8}) {
    lower::ConcatSpec s;
    static_cast<lower::MapShape&>(s) = lower::MapShape{t, 69, 9, 31};
    s.parts = {16, 32, 21};
    std::vector<Tensor> parts;
    std::vector<const Tensor*> ptrs;
    std::mt19937 rng(7);
    for (int64_t c : s.parts) {
      Tensor x = Tensor::empty(t, {1, c, s.H, s.W});
      auto* p = static_cast<uint8_t*>(x.raw());
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(i < 256 ? i : rng());
      parts.push_back(std::move(x));
    }
    for (const Tensor& x : parts) ptrs.push_back(&x);
    Tensor want = Tensor::empty(t, {1, s.C, s.H, s.W});
    auto* w = static_cast<uint8_t*>(want.raw());
    for (const Tensor& x : parts) w = std::copy_n(static_cast<const uint8_t*>(x.raw()), x.numel(), w);
    for (const char* knob : {"ew_mode=integer", "bs_shift_rounding=truncate", "out_cvt_rounding=half_away"}) {
      sim::Quirks q;
      ASSERT_TRUE(sim::set_knob(q, knob).ok());
      for (int path = 0; path < 2; ++path) {
        DeviceMemory mem;
        auto l = lower::lower_concat(s, mem);
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        EXPECT_EQ(l->tasks.size(), 3u);
        auto placed = lower::place_regcmd(mem, l->tasks);
        ASSERT_TRUE(placed.ok());
        ASSERT_TRUE(lower::write_concat_inputs(mem, s, *l, ptrs).ok());
        sim::SimCache cache;
        auto st = sim::run(mem, placed->address, placed->spans[0].word_count, q, path ? &cache : nullptr);
        ASSERT_TRUE(st.ok()) << st.error().to_string();
        EXPECT_EQ(st->size(), 3u);
        Tensor y = Tensor::empty(t, want.shape());
        ASSERT_TRUE(lower::gather_eltwise_output(mem, s, *l, y).ok());
        EXPECT_EQ(std::memcmp(y.raw(), want.raw(), want.nbytes()), 0) << knob << " path " << path << " " << dtype_name(t);
      }
    }
  }
  // A part that would start inside a block is refused by the rule, naming the offset.
  lower::ConcatSpec bad;
  static_cast<lower::MapShape&>(bad) = lower::MapShape{DType::i8, 37, 4, 4};
  bad.parts = {21, 16};
  DeviceMemory mem;
  auto l = lower::lower_concat(bad, mem);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().kind, ErrorKind::unsupported);
  EXPECT_NE(l.error().message.find("a part at channel 21: Concat, Split and DepthToSpace parts start at multiples of 16 channels"), std::string::npos)
      << l.error().message;
  bad.parts = {16, 16};
  EXPECT_EQ(lower::lower_concat(bad, mem).error().kind, ErrorKind::invalid);  // 32 channels do not make 37
}

TEST(NpuEltwise, SplitCopyTasksReadEveryPartFromItsChannelOffset) {
  // The converse of the Concat: a 69-channel map into parts of 32, 16 and 21 channels, every
  // code, both types, both simulator paths; each part equals the input's channels byte for byte.
  for (DType t : {DType::i8, DType::u8}) {
    lower::SplitSpec s;
    static_cast<lower::MapShape&>(s) = lower::MapShape{t, 69, 7, 33};
    s.parts = {32, 16, 21};
    Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
    std::mt19937 rng(11);
    auto* p = static_cast<uint8_t*>(x.raw());
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(i < 256 ? i : rng());
    for (int path = 0; path < 2; ++path) {
      DeviceMemory mem;
      auto l = lower::lower_split(s, mem);
      ASSERT_TRUE(l.ok()) << l.error().to_string();
      EXPECT_EQ(l->tasks.size(), 3u);
      auto placed = lower::place_regcmd(mem, l->tasks);
      ASSERT_TRUE(placed.ok());
      ASSERT_TRUE(lower::write_split_input(mem, s, *l, x).ok());
      sim::SimCache cache;
      auto st = sim::run(mem, placed->address, placed->spans[0].word_count, {}, path ? &cache : nullptr);
      ASSERT_TRUE(st.ok()) << st.error().to_string();
      EXPECT_EQ(st->size(), 3u);
      std::vector<Tensor> ys;
      for (int64_t c : s.parts) ys.push_back(Tensor::empty(t, {1, c, s.H, s.W}));
      ASSERT_TRUE(lower::gather_split_outputs(mem, s, *l, ys).ok());
      const uint8_t* at = p;
      for (size_t i = 0; i < ys.size(); ++i) {
        EXPECT_EQ(std::memcmp(ys[i].raw(), at, ys[i].nbytes()), 0) << "part " << i << " path " << path << " " << dtype_name(t);
        at += ys[i].nbytes();
      }
    }
  }
  // A part inside a block, and parts that do not add up, are refused.
  lower::SplitSpec bad;
  static_cast<lower::MapShape&>(bad) = lower::MapShape{DType::i8, 37, 4, 4};
  bad.parts = {21, 16};
  DeviceMemory mem;
  auto l = lower::lower_split(bad, mem);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().kind, ErrorKind::unsupported);
  EXPECT_NE(l.error().message.find("npu Split: a part at channel 21"), std::string::npos) << l.error().message;
  bad.parts = {16, 16};
  EXPECT_EQ(lower::lower_split(bad, mem).error().kind, ErrorKind::invalid);
}

TEST(NpuEltwise, LutTaskEqualsItsTableOnEveryCode) {
  // A random table of each type over a 37-channel map holding every code: the LUT task's
  // output is the table's entry for each input byte, on both simulator paths and under both
  // readings of the LUT's start (lut_start) and every interpolation rounding, since the
  // lowering's table has one entry per input value and never interpolates.
  for (DType t : {DType::i8, DType::u8}) {
    lower::LutSpec s;
    static_cast<lower::MapShape&>(s) = lower::MapShape{t, 37, 5, 11};
    std::mt19937 rng(t == DType::i8 ? 3 : 4);
    for (int i = 0; i < 256; ++i) s.table.push_back(lower::qmin_of(t) + static_cast<int32_t>(rng() % 256));
    Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
    auto* p = static_cast<uint8_t*>(x.raw());
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(i < 512 ? i : rng());
    for (const char* knob : {"lut_start=underflow", "lut_start=hit", "lut_interp_rounding=truncate", "lut_interp_rounding=half_to_even"}) {
      sim::Quirks q;
      ASSERT_TRUE(sim::set_knob(q, knob).ok());
      for (int path = 0; path < 2; ++path) {
        DeviceMemory mem;
        auto l = lower::lower_lut(s, mem);
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        ASSERT_EQ(l->tasks.size(), 1u);
        EXPECT_EQ(l->tasks[0].stream.size(), 2u * (1 + static_cast<size_t>(arch::kRk3588.lut_entries)));
        auto placed = lower::place_regcmd(mem, l->tasks);
        ASSERT_TRUE(placed.ok());
        for (const auto& d : regcmd::decode(placed->words)) EXPECT_TRUE(d.problems.empty()) << d.problems.front();
        ASSERT_TRUE(lower::write_lut_input(mem, s, *l, x).ok());
        sim::SimCache cache;
        auto st = sim::run(mem, placed->address, placed->spans[0].word_count, q, path ? &cache : nullptr);
        ASSERT_TRUE(st.ok()) << st.error().to_string();
        Tensor y = Tensor::empty(t, {1, s.C, s.H, s.W});
        ASSERT_TRUE(lower::gather_eltwise_output(mem, s, *l, y).ok());
        const auto* yo = static_cast<const uint8_t*>(y.raw());
        int wrong = 0;
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int index = t == DType::i8 ? static_cast<int8_t>(p[i]) + 128 : p[i];
          wrong += yo[i] != static_cast<uint8_t>(s.table[static_cast<size_t>(index)]);
        }
        EXPECT_EQ(wrong, 0) << dtype_name(t) << " " << knob << " path " << path;
      }
    }
  }
  // A table entry outside the type, and a table of another size, are refused.
  lower::LutSpec bad;
  static_cast<lower::MapShape&>(bad) = lower::MapShape{DType::i8, 16, 4, 4};
  bad.table.assign(256, 0);
  bad.table[9] = 200;
  DeviceMemory mem;
  EXPECT_EQ(lower::lower_lut(bad, mem).error().kind, ErrorKind::invalid);
  bad.table.resize(255);
  EXPECT_EQ(lower::lower_lut(bad, mem).error().kind, ErrorKind::invalid);
}

// The LUT stage by sim.h's definition (NVDLA's), computed here in double precision from the
// entries: a hit interpolates linearly between entries i and i + 1 at r / 2^sel, a miss
// follows the slope from the first entry (below START) or the last (past the table),
// rounded half away from zero.
double lut_definition(const std::vector<int16_t>& T, int64_t start, int64_t end, int sel, int64_t us, int ush, int64_t os, int osh, int64_t v) {
  const int64_t d = v - start;
  if (d <= 0) return T.front() + std::round(static_cast<double>(d) * static_cast<double>(us) / std::ldexp(1.0, ush));
  const int64_t i = d >> sel;
  if (i >= static_cast<int64_t>(T.size()) - 1)
    return T.back() + std::round(static_cast<double>(v - end) * static_cast<double>(os) / std::ldexp(1.0, osh));
  const double f = static_cast<double>(d - (i << sel)) / std::ldexp(1.0, sel);
  return std::round(T[static_cast<size_t>(i)] + (T[static_cast<size_t>(i) + 1] - T[static_cast<size_t>(i)]) * f);
}

TEST(NpuSim, LutIndexInterpolationAndSlopesFollowTheDefinition) {
  // A LUT task re-programmed by hand: LO from START -300 with index select 2 (each entry 4
  // input steps apart, interpolated), LE pushed far below every input so LO alone hits, and
  // non-zero under- and overflow slopes. The BS ALU adds `alu` to every input, so v = x +
  // alu covers [alu - 128, alu + 127]: the offsets move the inputs below START, through the
  // table's 512 x 4 steps and past its end. Entries and slopes keep the result near int8's
  // range, so OUT_CVT x 1 shows every step of it (half steps included: the rounding).
  lower::LutSpec s;
  static_cast<lower::MapShape&>(s) = lower::MapShape{DType::i8, 16, 16, 16};
  s.table.assign(256, 0);
  std::mt19937 rng(5);
  std::vector<int16_t> T(static_cast<size_t>(arch::kRk3588.lut_entries));
  for (auto& e : T) e = static_cast<int16_t>(static_cast<int>(rng() % 201) - 100);
  const int64_t start = -300, sel = 2, end = start + ((static_cast<int64_t>(T.size()) - 1) << sel);
  const int64_t us = -300, ush = 7, os = 21, osh = 7;
  Tensor x = Tensor::empty(DType::i8, {1, 16, 16, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int8_t>()[i] = static_cast<int8_t>(i % 256 - 128);
  for (int32_t alu : {-200, 0, 700, 1500, 1950, 2200}) {
    DeviceMemory mem;
    auto l = lower::lower_lut(s, mem);
    ASSERT_TRUE(l.ok());
    regcmd::Task& task = l->tasks[0];
    lower::LutTable lt{0, T};
    auto up = lower::lut_upload(lt);
    ASSERT_TRUE(up.ok());
    task.stream = *up;
    task.regs.set(arch::DPU_BS_ALU_CFG, static_cast<uint32_t>(alu));
    task.regs.set(arch::DPU_LUT_LE_START, static_cast<uint32_t>(-2000000000));
    task.regs.set(arch::DPU_LUT_LE_END, static_cast<uint32_t>(-1999999000));
    task.regs.set(arch::DPU_LUT_LO_START, static_cast<uint32_t>(start));
    task.regs.set(arch::DPU_LUT_LO_END, static_cast<uint32_t>(end));
    ASSERT_TRUE(task.regs.set(arch::DPU_LUT_INFO_LUT_LO_INDEX_SELECT, sel).ok());
    ASSERT_TRUE(task.regs.set(arch::DPU_LUT_INFO_LUT_LE_INDEX_SELECT, 0).ok());
    ASSERT_TRUE(task.regs.set(arch::DPU_LUT_LO_SLOPE_SCALE_LUT_LO_SLOPE_UFLOW_SCALE, static_cast<uint16_t>(us)).ok());
    ASSERT_TRUE(task.regs.set(arch::DPU_LUT_LO_SLOPE_SCALE_LUT_LO_SLOPE_OFLOW_SCALE, static_cast<uint16_t>(os)).ok());
    ASSERT_TRUE(task.regs.set(arch::DPU_LUT_LO_SLOPE_SHIFT_LUT_LO_SLOPE_UFLOW_SHIFT, ush).ok());
    ASSERT_TRUE(task.regs.set(arch::DPU_LUT_LO_SLOPE_SHIFT_LUT_LO_SLOPE_OFLOW_SHIFT, osh).ok());
    auto placed = lower::place_regcmd(mem, l->tasks);
    ASSERT_TRUE(placed.ok());
    ASSERT_TRUE(lower::write_lut_input(mem, s, *l, x).ok());
    auto st = sim::run(mem, placed->address, placed->spans[0].word_count, {});
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    Tensor y = Tensor::empty(DType::i8, {1, 16, 16, 16});
    ASSERT_TRUE(lower::gather_eltwise_output(mem, s, *l, y).ok());
    int wrong = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t v = x.data<int8_t>()[i] + alu;
      const double lut = lut_definition(T, start, end, static_cast<int>(sel), us, static_cast<int>(ush), os, static_cast<int>(osh), v);
      const double o = std::clamp(lut, -128.0, 127.0);  // OUT_CVT x 1
      wrong += y.data<int8_t>()[i] != static_cast<int8_t>(o);
    }
    EXPECT_EQ(wrong, 0) << "alu " << alu;
  }
}

TEST(NpuSim, LutRefusesWhatIsNotSimulatedByRegister) {
  lower::LutSpec s;
  static_cast<lower::MapShape&>(s) = lower::MapShape{DType::i8, 16, 4, 4};
  for (int i = 0; i < 256; ++i) s.table.push_back(i - 128);
  auto run_with = [&](const std::function<void(regcmd::Task&)>& edit) -> std::string {
    DeviceMemory mem;
    auto l = lower::lower_lut(s, mem);
    if (!l.ok()) return l.error().message;
    edit(l->tasks[0]);
    auto placed = lower::place_regcmd(mem, l->tasks);
    if (!placed.ok()) return placed.error().message;
    auto r = sim::run(mem, placed->address, placed->spans[0].word_count, {});
    return r.ok() ? std::string("ok") : r.error().message;
  };
  EXPECT_EQ(run_with([](regcmd::Task&) {}), "ok");
  EXPECT_NE(run_with([](regcmd::Task& t) { (void)t.regs.set(arch::DPU_LUT_CFG_LUT_ROAD_SEL, 1); }).find("LUT_CFG"), std::string::npos);
  EXPECT_NE(run_with([](regcmd::Task& t) { t.stream.resize(100); }).find("both tables"), std::string::npos);
  EXPECT_NE(run_with([](regcmd::Task& t) { t.stream.erase(t.stream.begin()); }).find("LUT_ACCESS_CFG"), std::string::npos);
  EXPECT_NE(run_with([](regcmd::Task& t) { t.stream.push_back(t.stream.back()); }).find("past the table"), std::string::npos);
  EXPECT_NE(run_with([](regcmd::Task& t) { (void)t.regs.set(arch::DPU_EW_CFG_EW_RELU_BYPASS, 0); }).find("EW ReLU"), std::string::npos);
}

TEST(NpuEltwise, SimulatorRefusesMalformedDpuOnlyTasksByRegister) {
  lower::AddSpec s;
  s.C = 16;
  s.H = 4;
  s.W = 4;
  s.q = quant::QBinaryParams{0.1f, 0.2f, 0.3f, 0, 0, 0, -128, 127, quant::Requant::rknpu_out_cvt};
  auto run_with = [&](const std::function<void(regcmd::Task&)>& edit) -> Status {
    DeviceMemory mem;
    RKD_ASSIGN(lower::LoweredEltwise l, lower::lower_add(s, mem));
    edit(l.tasks[0]);
    RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l.tasks));
    auto r = sim::run(mem, placed.address, placed.spans[0].word_count, {});
    if (!r.ok()) return r.error();
    return {};
  };
  EXPECT_TRUE(run_with([](regcmd::Task&) {}).ok());
  auto message = [&](const std::function<void(regcmd::Task&)>& edit) {
    const Status st = run_with(edit);
    return st.ok() ? std::string("ok") : st.error().message;
  };
  EXPECT_NE(message([](regcmd::Task& t) { (void)t.regs.set(arch::DPU_RDMA_RDMA_FEATURE_MODE_CFG_MRDMA_DISABLE, 1); }).find("MRDMA_DISABLE"),
            std::string::npos);
  EXPECT_NE(message([](regcmd::Task& t) { (void)t.regs.set(arch::DPU_RDMA_RDMA_DATA_CUBE_WIDTH_WIDTH, 7); }).find("RDMA_DATA_CUBE"),
            std::string::npos);
  EXPECT_NE(message([](regcmd::Task& t) { (void)t.regs.set(arch::DPU_RDMA_RDMA_FEATURE_MODE_CFG_IN_PRECISION, 2); }).find("int8 input"),
            std::string::npos);
  EXPECT_NE(message([](regcmd::Task& t) { t.enable_mask = 0x78; }).find("enable mask"), std::string::npos);  // DPU feeding the PPU
}

}  // namespace
}  // namespace rkd::npu
