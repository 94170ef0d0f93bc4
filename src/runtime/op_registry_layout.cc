// Kernels of the layout family: views and copies, Concat, Split, Slice, gathers and scatters,
// Transpose, Expand, Tile, Pad, and the shape and constant producers.
#include "runtime/op_registry_detail.h"

#include <algorithm>
#include <cstring>

#include "ir/passes/shape_inference.h"
#include "kernels/tensor_ops.h"

namespace rkd::runtime::detail {

namespace {

Result<Kernel> copy_kernel() {
  return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    ops::copy_into(in[0]->with_layout(out[0].shape(), contiguous_strides(out[0].shape())), out[0]);
    return {};
  });
}

Result<Kernel> slice_factory(const Node& n, int64_t opset) {
  std::vector<int64_t> a_starts, a_ends, a_axes;
  const bool from_attrs = opset < 10;
  if (from_attrs) {
    RKD_ASSIGN(a_starts, n.attr_ints("starts", {}));
    RKD_ASSIGN(a_ends, n.attr_ints("ends", {}));
    RKD_ASSIGN(a_axes, n.attr_ints("axes", {}));
  }
  return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
    const Tensor& x = *in[0];
    const int r = x.rank();
    std::vector<int64_t> starts = from_attrs ? a_starts : ints_of(in[1]);
    std::vector<int64_t> ends = from_attrs ? a_ends : ints_of(in[2]);
    std::vector<int64_t> axes = from_attrs ? a_axes : ints_of(in.size() > 3 ? in[3] : nullptr);
    std::vector<int64_t> steps = ints_of(!from_attrs && in.size() > 4 ? in[4] : nullptr);
    std::vector<int64_t> start(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int a = norm_axis(axes.empty() ? static_cast<int64_t>(i) : axes[i], r);
      const int64_t dim = x.shape()[static_cast<size_t>(a)];
      const int64_t st = steps.empty() ? 1 : steps[i];
      int64_t s = starts[i];
      if (s < 0) s += dim;
      s = st > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
      start[static_cast<size_t>(a)] = s;
      step[static_cast<size_t>(a)] = st;
    }
    ops::slice(x, start, step, out[0]);
    return {};
  });
}

}  // namespace

void register_layout_ops(std::map<std::string, Factory>& r) {
  for (const char* v : {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"}) {
    r[v] = [](const Node&, int64_t) { return copy_kernel(); };
  }
  r["Dropout"] = [](const Node& n, int64_t) -> Result<Kernel> {
    if (n.inputs.size() > 2 && n.inputs[2]) {
      const ir::Value* tm = n.inputs[2];
      if (!tm->constant || tm->constant->get_as_double(0) != 0) {
        return unsupported(n.describe() + ": training-mode Dropout (random) is not an inference op");
      }
    }
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      ops::copy_into(*in[0], out[0]);
      if (out.size() > 1 && out[1].defined()) std::fill_n(out[1].data<uint8_t>(), out[1].numel(), uint8_t{1});
      return {};
    });
  };
  r["Concat"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
    RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
    return Kernel([axis](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      ops::concat(in, axis, out[0]);
      return {};
    });
  };
  r["Split"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
    RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
    return Kernel([axis](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      int64_t at = 0;
      for (Tensor& o : out) {
        const int64_t len = o.shape()[static_cast<size_t>(axis)];
        if (o.defined()) {
          RKD_ASSIGN(Tensor v, in[0]->slice(axis, at, at + len));
          ops::copy_into(v, o);
        }
        at += len;
      }
      return {};
    });
  };
  r["Slice"] = slice_factory;
  // Gather and GatherElements: one axis attribute, errors prefixed with the node.
  using GatherFn = Status (*)(const Tensor&, const Tensor&, int, Tensor&);
  for (const auto& [name, fn] :
       {std::pair<const char*, GatherFn>{"Gather", ops::gather}, std::pair<const char*, GatherFn>{"GatherElements", ops::gather_elements}}) {
    r[name] = [fn = fn](const Node& n, int64_t) -> Result<Kernel> {
      RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
      RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
      const std::string what = n.describe();
      return Kernel([fn, axis, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        Status s = fn(*in[0], *in[1], axis, out[0]);
        return s.ok() ? s : s.error().with_context(what);
      });
    };
  }
  r["GatherND"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(int64_t bd, n.attr_int("batch_dims", 0));
    if (bd < 0) return invalid(n.describe() + ": batch_dims must not be negative");
    const std::string what = n.describe();
    return Kernel([bd, what](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      Status s = ops::gather_nd(*in[0], *in[1], static_cast<int>(bd), out[0]);
      return s.ok() ? s : s.error().with_context(what);
    });
  };
  r["ScatterND"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(std::string red, n.attr_string("reduction", "none"));
    return Kernel(
        [red](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return ops::scatter_nd(*in[0], *in[1], *in[2], red, out[0]); });
  };
  r["ScatterElements"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(std::string red, n.attr_string("reduction", "none"));
    RKD_ASSIGN(int64_t a, n.attr_int("axis", 0));
    RKD_ASSIGN(int axis, checked_axis(n, a, rank_of(n, 0)));
    return Kernel([red, axis](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
      return ops::scatter_elements(*in[0], *in[1], *in[2], axis, red, out[0]);
    });
  };
  r["Transpose"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(auto perm, n.attr_ints("perm", {}));
    const int rank = rank_of(n, 0);
    if (perm.empty()) {
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    }
    return Kernel([perm](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      ops::transpose(*in[0], perm, out[0]);
      return {};
    });
  };
  // DepthToSpace as ONNX defines it: a reshape to 6-D, a transpose, the output's shape (DCR:
  // channel (i b + j) C' + c goes to cell (i, j) of block c; CRD: c b^2 + i b + j).
  r["DepthToSpace"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(int64_t b, n.attr_int("blocksize", 0));
    RKD_ASSIGN(std::string mode, n.attr_string("mode", "DCR"));
    if (b < 1 || (mode != "DCR" && mode != "CRD")) return invalid(n.describe() + ": blocksize must be positive and mode DCR or CRD");
    const bool dcr = mode == "DCR";
    return Kernel([b, dcr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      const Shape& xs = in[0]->shape();
      if (xs.size() != 4 || xs[1] % (b * b) != 0) return invalid("DepthToSpace: the input must be [N, C, H, W] with C a multiple of blocksize^2");
      const int64_t N = xs[0], C = xs[1] / (b * b), H = xs[2], W = xs[3];
      const Tensor x = in[0]->contiguous();
      RKD_ASSIGN(Tensor x6, x.reshape(dcr ? Shape{N, b, b, C, H, W} : Shape{N, C, b, b, H, W}));
      RKD_ASSIGN(Tensor y6, out[0].reshape(Shape{N, C, H, b, W, b}));
      ops::transpose(x6, dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3}, y6);
      return {};
    });
  };
  r["Expand"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      ops::copy_into(*in[0], out[0]);
      return {};
    });
  };
  r["Tile"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      ops::tile(*in[0], out[0]);
      return {};
    });
  };
  r["Pad"] = [](const Node& n, int64_t opset) -> Result<Kernel> {
    RKD_ASSIGN(std::string mode, n.attr_string("mode", "constant"));
    ops::PadMode pm;
    if (mode == "constant") pm = ops::PadMode::constant;
    else if (mode == "reflect") pm = ops::PadMode::reflect;
    else if (mode == "edge") pm = ops::PadMode::edge;
    else if (mode == "wrap") pm = ops::PadMode::wrap;
    else return invalid(n.describe() + ": unknown mode '" + mode + "'");
    RKD_ASSIGN(auto attr_pads, n.attr_ints("pads", {}));
    RKD_ASSIGN(float attr_value, n.attr_float("value", 0.f));
    return Kernel([=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      const int rank = in[0]->rank();
      std::vector<int64_t> p = opset >= 11 ? ints_of(in[1]) : attr_pads;
      double value = attr_value;
      if (opset >= 11 && in.size() > 2 && in[2] && in[2]->numel() > 0) value = in[2]->get_as_double(0);
      std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
      if (in.size() > 3 && in[3]) {
        const auto axes = ints_of(in[3]);
        for (size_t i = 0; i < axes.size(); ++i) {
          const int a = norm_axis(axes[i], rank);
          full[static_cast<size_t>(a)] = p[i];
          full[static_cast<size_t>(a + rank)] = p[i + axes.size()];
        }
      } else {
        full = p;
      }
      return ops::pad(*in[0], full, pm, value, out[0]);
    });
  };
  r["Shape"] = [](const Node& n, int64_t) -> Result<Kernel> {
    RKD_ASSIGN(int64_t start, n.attr_int("start", 0));
    return Kernel([start](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      const int64_t rank = in[0]->rank();
      int64_t s = start < 0 ? start + rank : start;
      s = std::clamp<int64_t>(s, 0, rank);
      for (int64_t i = 0; i < out[0].numel(); ++i) out[0].data<int64_t>()[i] = in[0]->shape()[static_cast<size_t>(s + i)];
      return {};
    });
  };
  r["Size"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      out[0].data<int64_t>()[0] = in[0]->numel();
      return {};
    });
  };
  r["ConstantOfShape"] = [](const Node& n, int64_t) -> Result<Kernel> {
    Tensor value = Tensor::from_floats({1}, std::vector<float>{0.f});
    if (auto it = n.attrs.find("value"); it != n.attrs.end()) {
      const Tensor* t = std::get_if<Tensor>(&it->second);
      if (!t || t->numel() != 1) return invalid(n.describe() + ": value must be a one-element tensor");
      value = *t;
    }
    return Kernel([value](const std::vector<const Tensor*>&, std::vector<Tensor>& out) -> Status {
      ops::fill(out[0], value.with_layout({}, {}));
      return {};
    });
  };
  r["Constant"] = [](const Node& n, int64_t) -> Result<Kernel> {
    Tensor value;
    for (const auto& [k, a] : n.attrs) {
      if (const Tensor* t = std::get_if<Tensor>(&a)) value = *t;
      else if (const float* f = std::get_if<float>(&a)) value = Tensor::from_floats({}, std::vector<float>{*f});
      else if (const auto* fs = std::get_if<std::vector<float>>(&a)) value = Tensor::from_floats({static_cast<int64_t>(fs->size())}, *fs);
      else if (const int64_t* i = std::get_if<int64_t>(&a)) {
        value = Tensor::empty(DType::i64, {});
        value.data<int64_t>()[0] = *i;
      } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) {
        value = Tensor::empty(DType::i64, {static_cast<int64_t>(is->size())});
        std::copy(is->begin(), is->end(), value.data<int64_t>());
      }
    }
    if (!value.defined()) return unsupported(n.describe() + ": Constant without a tensor, float(s) or int(s) value");
    return Kernel([value](const std::vector<const Tensor*>&, std::vector<Tensor>& out) -> Status {
      ops::copy_into(value, out[0]);
      return {};
    });
  };
  r["Range"] = [](const Node&, int64_t) -> Result<Kernel> {
    return Kernel([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
      ops::range(in[0]->get_as_double(0), in[2]->get_as_double(0), out[0]);
      return {};
    });
  };
}

}  // namespace rkd::runtime::detail
