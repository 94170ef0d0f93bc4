#include "runtime/executor.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/thread_pool.h"
#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"
#include "kernels/tensor_ops.h"
#include "quant/requant.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_device.h"
#include "runtime/npu_ops.h"
#include "runtime/op_registry.h"

namespace rkd::runtime {

std::vector<std::string> unexecutable_nodes(const ir::Graph& g) {
  std::vector<std::string> problems;
  for (const auto& n : g.nodes()) {
    if (!has_kernel(n->domain, n->op_type)) {
      problems.push_back(n->describe() + ": no CPU kernel");
      continue;
    }
    for (const ir::Value* o : n->outputs) {
      if (o && (!ir::static_shape(o) || !o->dtype)) {
        problems.push_back(n->describe() + ": output '" + o->name + "' has no static shape" +
                           (o->shape ? " (" + ir::dims_to_string(*o->shape) + ")" : ""));
      }
    }
  }
  return problems;
}

struct Executor::Step {
  const ir::Node* node = nullptr;
  Kernel kernel;
  bool view = false;  // output slot aliases input 0
  Shape view_shape;   // the view's output shape
  std::vector<int> in_slots, out_slots;
};

namespace {

struct Planned {
  int slot = -1;
  int64_t bytes = 0, offset = -1;
  int first = 0, last = 0;
};

int64_t align64(int64_t x) { return (x + 63) / 64 * 64; }

}  // namespace

Status check_graph_memory(const ir::Graph& g) {
  uint64_t constants = 0, largest = 0;
  for (const auto& v : g.values()) {
    if (v->constant) constants += v->constant->nbytes();
  }
  auto bytes_of = [](const ir::Value* v) -> Result<uint64_t> {
    if (!v || v->constant || !v->dtype) return uint64_t{0};
    const auto shape = ir::static_shape(v);
    if (!shape) return uint64_t{0};
    return checked_shape_bytes(*shape, *v->dtype, "value '" + v->name + "'");
  };
  for (const auto& np : g.nodes()) {
    uint64_t step = 0;
    for (const auto* list : {&np->inputs, &np->outputs}) {
      for (const ir::Value* v : *list) {
        auto b = bytes_of(v);
        if (!b) return b.error().with_context(np->describe());
        step += *b;
      }
    }
    largest = std::max(largest, step);
  }
  return check_memory_estimate(constants + largest, "the model (its constants and its largest node's inputs and outputs)");
}

struct ExecutorBuilder {
  static Result<std::unique_ptr<Executor>> build(const ir::Graph& g, const ExecutorOptions& opt, int depth = 0) {
    if (depth == 0) {
      RKD_TRY(check_thread_count(opt.threads, "threads"));
      RKD_TRY(check_graph_memory(g));
    }
    std::unique_ptr<Executor> e(new Executor());
    e->g_ = &g;
    e->opt_ = opt;
    set_global_thread_count(opt.threads);
    ops::set_math_threads(opt.threads);
    auto slot = [&](const ir::Value* v) -> int {
      auto it = e->slot_of_.find(v);
      if (it != e->slot_of_.end()) return static_cast<int>(it->second);
      const size_t s = e->slots_.size();
      e->slot_of_[v] = s;
      e->slots_.emplace_back();
      return static_cast<int>(s);
    };
    std::set<const ir::Value*> outputs(g.outputs.begin(), g.outputs.end());
    for (const ir::Value* v : g.inputs) slot(v);
    // Constants are bound once.
    for (const auto& v : g.values()) {
      if (v->constant) {
        e->slots_[static_cast<size_t>(slot(v.get()))] = v->constant->contiguous();
        e->plan_.constant_bytes += static_cast<int64_t>(v->constant->nbytes());
      }
    }
    std::map<int, int> root_of;         // alias slot -> root slot
    std::vector<Error> prepare_errors;  // reported together after the walk
    std::map<int, Planned> planned;
    for (const auto& np : g.nodes()) {
      const ir::Node& n = *np;
      auto st = std::make_shared<Executor::Step>();
      st->node = &n;
      for (const ir::Value* v : n.inputs) st->in_slots.push_back(v ? slot(v) : -1);
      for (const ir::Value* v : n.outputs) st->out_slots.push_back(v ? slot(v) : -1);
      const bool out_is_graph_output = n.outputs.size() == 1 && n.outputs[0] && outputs.count(n.outputs[0]);
      st->view = ir::op_has(n, ir::kView) && !out_is_graph_output && n.outputs.size() == 1 && n.outputs[0];
      if (st->view) {
        auto vs = ir::static_shape(n.outputs[0]);
        if (!vs) return unsupported(n.describe() + ": output has no static shape (run optimize() first)");
        st->view_shape = *vs;
      }
      if (!st->view) {
        const bool npu = ir::op_has(n, ir::kOnNpu);
        if (npu && !e->npu_ && (opt.npu_chaining || opt.npu_device)) e->npu_ = make_npu_session(g.outputs, opt.npu_device);
        auto k = npu ? npu_node_kernel(n, e->npu_) : prepare_op(n, g.opset);
        if (!k.ok()) {
          prepare_errors.push_back(k.error());
        } else {
          st->kernel = std::move(k).value();
        }
      }
      const int idx = static_cast<int>(e->steps_.size());
      // Lifetimes: every read extends the root's life.
      for (int s : st->in_slots) {
        if (s < 0) continue;
        const int r = root_of.count(s) ? root_of[s] : s;
        if (planned.count(r)) planned[r].last = std::max(planned[r].last, idx);
      }
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        const ir::Value* v = n.outputs[i];
        if (!v) continue;
        const int s = st->out_slots[i];
        if (st->view) {
          const int in = st->in_slots[0];
          root_of[s] = root_of.count(in) ? root_of[in] : in;
          ++e->plan_.aliased_values;
          continue;
        }
        auto shape = ir::static_shape(v);
        if (!shape || !v->dtype) {
          return unsupported(n.describe() + ": output '" + v->name + "' has no static shape (run optimize() first)");
        }
        RKD_ASSIGN(uint64_t bytes, checked_shape_bytes(*shape, *v->dtype, v->name));
        if (outputs.count(v)) {
          e->plan_.output_bytes += static_cast<int64_t>(bytes);
          continue;
        }
        Planned p;
        p.slot = s;
        p.bytes = align64(static_cast<int64_t>(bytes));
        p.first = p.last = idx;
        planned[s] = p;
      }
      e->steps_.push_back(st);
    }
    if (!prepare_errors.empty()) {
      if (prepare_errors.size() == 1) return prepare_errors[0];
      bool all_unsupported = true;
      std::string msg = std::to_string(prepare_errors.size()) + " node(s) cannot be prepared:";
      for (const Error& err : prepare_errors) {
        all_unsupported = all_unsupported && err.kind == ErrorKind::unsupported;
        msg += "\n  " + err.to_string();
      }
      return Error{all_unsupported ? ErrorKind::unsupported : ErrorKind::invalid, msg};
    }
    // On a device the session's memory is one buffer object whose address the kernel picks:
    // a second preparation lowers everything at that address (the lowering is deterministic:
    // the same bytes), then the session moves into it.
    if (e->npu_ && opt.npu_device) {
      if (npu_session_needs_arena(*e->npu_, *opt.npu_device)) {
        if (depth > 0) return invalid("the NPU nodes' device memory changed between two preparations");
        RKD_TRY(opt.npu_device->make_arena(npu_session_memory(*e->npu_).size()));
        return build(g, opt, depth + 1);
      }
      RKD_TRY(npu_session_attach(*e->npu_, opt.npu_device));
    }
    // Greedy by size: place the largest first at the lowest offset that does not overlap
    // any placed value alive at the same time.
    std::vector<Planned*> order;
    for (auto& [s, p] : planned) order.push_back(&p);
    std::stable_sort(order.begin(), order.end(), [](const Planned* a, const Planned* b) { return a->bytes > b->bytes; });
    std::vector<Planned*> placed;
    int64_t arena = 0;
    for (Planned* p : order) {
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const Planned* q : placed) {
        if (q->first <= p->last && p->first <= q->last) busy.emplace_back(q->offset, q->offset + q->bytes);
      }
      std::sort(busy.begin(), busy.end());
      int64_t at = 0;
      for (const auto& [b, en] : busy) {
        if (at + p->bytes <= b) break;
        at = std::max(at, en);
      }
      p->offset = at;
      arena = std::max(arena, at + p->bytes);
      placed.push_back(p);
      e->plan_.intermediate_bytes += p->bytes;
      ++e->plan_.planned_values;
    }
    e->plan_.arena_bytes = arena;
    const size_t alloc = static_cast<size_t>(std::max<int64_t>(arena, 64) + (size_t{2} << 20) - 1) / (size_t{2} << 20) * (size_t{2} << 20);
    uint8_t* mem = static_cast<uint8_t*>(std::aligned_alloc(size_t{2} << 20, alloc));
    if (!mem) return io_error("out of memory allocating the " + std::to_string(arena) + "-byte activation arena");
    ::madvise(mem, alloc, MADV_HUGEPAGE);
    e->arena_ = std::shared_ptr<uint8_t[]>(mem, [](uint8_t* q) { std::free(q); });
    std::map<int, const ir::Value*> value_of_slot;
    for (const auto& [val, sl] : e->slot_of_) value_of_slot[static_cast<int>(sl)] = val;
    for (const auto& [s, p] : planned) {
      const ir::Value* v = value_of_slot.at(s);
      e->slots_[static_cast<size_t>(s)] = Tensor::wrap(e->arena_, static_cast<size_t>(p.offset), *v->dtype, *ir::static_shape(v));
    }
    return e;
  }
};

Result<std::unique_ptr<Executor>> Executor::create(const ir::Graph& g, const ExecutorOptions& opt) { return ExecutorBuilder::build(g, opt); }

Status check_graph_inputs(const ir::Graph& g, const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, t] : inputs) {
    bool known = false;
    for (const ir::Value* v : g.inputs) known = known || v->name == name;
    if (!known) {
      std::string names;
      for (const ir::Value* v : g.inputs) names += (names.empty() ? "" : ", ") + v->name;
      return invalid("input '" + name + "': the model has no such input (inputs: " + names + ")");
    }
  }
  for (const ir::Value* v : g.inputs) {
    auto it = inputs.find(v->name);
    if (it == inputs.end()) return invalid("input '" + v->name + "' is missing");
    const Tensor& t = it->second;
    if (v->dtype && t.dtype() != *v->dtype) {
      return invalid("input '" + v->name + "': dtype " + dtype_name(t.dtype()) + ", the model expects " + dtype_name(*v->dtype));
    }
    auto s = ir::static_shape(v);
    if (s && t.shape() != *s) {
      return invalid("input '" + v->name + "': shape " + shape_to_string(t.shape()) + ", the model expects " + shape_to_string(*s));
    }
  }
  return {};
}

Result<std::map<std::string, Tensor>> Executor::run(const std::map<std::string, Tensor>& inputs) {
  RKD_TRY(check_graph_inputs(*g_, inputs));
  for (const ir::Value* v : g_->inputs) slots_[slot_of_.at(v)] = inputs.at(v->name).contiguous();
  for (const ir::Value* v : g_->outputs) {
    if (!v->producer || v->constant) continue;
    const auto s = ir::static_shape(v);
    RKD_ASSIGN(Tensor t, Tensor::uninitialized(*v->dtype, *s));
    slots_[slot_of_.at(v)] = std::move(t);
  }
  profile_.clear();
  std::vector<const Tensor*> in;
  std::vector<Tensor> out;
  for (const auto& st : steps_) {
    const auto t0 = opt_.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (st->view) {
      const Tensor& src = slots_[static_cast<size_t>(st->in_slots[0])];
      slots_[static_cast<size_t>(st->out_slots[0])] = src.with_layout(st->view_shape, contiguous_strides(st->view_shape));
    } else {
      in.clear();
      out.clear();
      for (int s : st->in_slots) in.push_back(s < 0 ? nullptr : &slots_[static_cast<size_t>(s)]);
      for (int s : st->out_slots) out.push_back(s < 0 ? Tensor() : slots_[static_cast<size_t>(s)]);
      Status r = st->kernel(in, out);
      if (!r.ok()) return r.error().with_context(st->node->describe());
    }
    if (opt_.profile) {
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      profile_.push_back(NodeTime{st->node->name, st->node->op_type, us});
    }
    if (opt_.rewrite || opt_.observe) {
      for (size_t k = 0; k < st->out_slots.size(); ++k) {
        const int s = st->out_slots[k];
        if (s < 0 || k >= st->node->outputs.size() || !st->node->outputs[k]) continue;
        if (opt_.rewrite) opt_.rewrite(*st->node->outputs[k], slots_[static_cast<size_t>(s)]);
        if (opt_.observe) opt_.observe(*st->node->outputs[k], slots_[static_cast<size_t>(s)]);
      }
    }
  }
  std::map<std::string, Tensor> result;
  // Constant outputs are copied: the caller may write into what it gets back.
  for (const ir::Value* v : g_->outputs) {
    const Tensor& t = slots_[slot_of_.at(v)];
    result[v->name] = v->constant ? t.clone() : t;
  }
  // Drop references to caller-owned inputs and returned outputs.
  for (const ir::Value* v : g_->inputs) slots_[slot_of_.at(v)] = Tensor();
  for (const ir::Value* v : g_->outputs) {
    if (v->producer && !v->constant) slots_[slot_of_.at(v)] = Tensor();
  }
  return result;
}

}  // namespace rkd::runtime
