// Building QDQ graphs in tests: float inputs, QuantizeLinear / DequantizeLinear pairs of one
// 8-bit type (int8, or uint8 on the same grid shifted by 128) and float ops between them.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/ir.h"

namespace rkd {

struct Builder {
  ir::Graph g;
  DType t;
  int n = 0;
  ir::Value* scalar(float v) { return g.add_constant("s", Tensor::from_floats({}, std::vector<float>{v})); }
  ir::Value* zp(int v) {
    Tensor z = Tensor::empty(t, {});
    if (t == DType::i8) z.data<int8_t>()[0] = static_cast<int8_t>(v);
    else z.data<uint8_t>()[0] = static_cast<uint8_t>(v + 128);  // the same grid shifted to uint8
    return g.add_constant("z", z);
  }
  std::string id(const char* base) {
    std::string s = base;
    s += std::to_string(n++);
    return s;
  }
  ir::Value* q(ir::Value* x, float s, int z) { return (*g.add_node(id("q"), "QuantizeLinear", "", {x, scalar(s), zp(z)}, {id("qv")}))->outputs[0]; }
  ir::Value* dq(ir::Value* x, float s, int z) {
    return (*g.add_node(id("d"), "DequantizeLinear", "", {x, scalar(s), zp(z)}, {id("dv")}))->outputs[0];
  }
  ir::Node* op(const char* type, std::vector<ir::Value*> in) { return *g.add_node(id(type), type, "", in, {id("v")}); }
  // The float graph input "x" of [1, C, H, W] (opset 13).
  ir::Value* input(int64_t C, int64_t H, int64_t W) {
    g.opset = 13;
    ir::Value* x = *g.add_value("x");
    x->dtype = DType::f32;
    x->shape = ir::Dims{ir::Dim{1, ""}, ir::Dim{C, ""}, ir::Dim{H, ""}, ir::Dim{W, ""}};
    g.inputs.push_back(x);
    return x;
  }
};

}  // namespace rkd
