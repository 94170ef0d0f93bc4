#include "ir/ir.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace rkd::ir {

std::string dims_to_string(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + d[i].to_string();
  return s + "]";
}

std::optional<int64_t> Value::static_numel() const {
  if (!shape) return std::nullopt;
  int64_t n = 1;
  for (const Dim& d : *shape) {
    if (!d.is_static()) return std::nullopt;
    if (__builtin_mul_overflow(n, d.value, &n)) return INT64_MAX;  // saturates: callers compare with limits
  }
  return n;
}

std::string Node::describe() const { return "node '" + name + "' (" + op_type + ")"; }

namespace {
template <typename T>
Result<T> get_attr(const Node& n, const std::string& key, const T& fallback, const char* kind) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return fallback;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return invalid(n.describe() + ": attribute '" + key + "' must be " + kind);
}
}  // namespace

Result<int64_t> Node::attr_int(const std::string& key, int64_t fallback) const { return get_attr<int64_t>(*this, key, fallback, "an int"); }
Result<float> Node::attr_float(const std::string& key, float fallback) const { return get_attr<float>(*this, key, fallback, "a float"); }
Result<std::string> Node::attr_string(const std::string& key, const std::string& fallback) const {
  return get_attr<std::string>(*this, key, fallback, "a string");
}
Result<std::vector<int64_t>> Node::attr_ints(const std::string& key, const std::vector<int64_t>& fallback) const {
  return get_attr<std::vector<int64_t>>(*this, key, fallback, "a list of ints");
}

Result<Value*> Graph::add_value(const std::string& value_name) {
  if (value_name.empty()) return invalid("value: empty name");
  if (by_name_.count(value_name)) return invalid("value '" + value_name + "' is defined twice");
  values_.push_back(std::make_unique<Value>());
  Value* v = values_.back().get();
  v->name = value_name;
  by_name_[value_name] = v;
  return v;
}

Status Graph::rename_value(Value* v, const std::string& value_name) {
  if (value_name.empty()) return invalid("value: empty name");
  if (value_name == v->name) return {};
  if (by_name_.count(value_name)) return invalid("value '" + value_name + "' is defined twice");
  by_name_.erase(v->name);
  v->name = value_name;
  by_name_[value_name] = v;
  return {};
}

Value* Graph::find(const std::string& value_name) const {
  auto it = by_name_.find(value_name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<Node*> Graph::add_node(const std::string& node_name, const std::string& op_type, const std::string& domain, const std::vector<Value*>& ins,
                              const std::vector<std::string>& output_names) {
  // Check every output name first so that a failure leaves the graph unchanged.
  for (size_t i = 0; i < output_names.size(); ++i) {
    const std::string& o = output_names[i];
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || (!o.empty() && output_names[j] == o);
    if (!o.empty() && (by_name_.count(o) || repeated)) {
      return invalid("node '" + node_name + "' (" + op_type + "): output '" + o +
                     "' is already defined (by a graph input, an initializer or another node)");
    }
  }
  nodes_.push_back(std::make_unique<Node>());
  Node* n = nodes_.back().get();
  n->name = node_name;
  n->op_type = op_type;
  n->domain = domain;
  n->inputs = ins;
  for (Value* v : ins) {
    if (v) v->consumers.push_back(n);
  }
  for (const std::string& o : output_names) {
    if (o.empty()) {
      n->outputs.push_back(nullptr);
      continue;
    }
    auto v = add_value(o);  // cannot fail: checked above
    (*v)->producer = n;
    n->outputs.push_back(*v);
  }
  return n;
}

void Graph::set_input(Node* n, size_t i, Value* v) {
  if (i >= n->inputs.size()) n->inputs.resize(i + 1, nullptr);
  Value* old = n->inputs[i];
  n->inputs[i] = v;
  if (old) {
    // Drop one occurrence of n unless n still reads old through another input.
    bool still = false;
    for (Value* x : n->inputs) still = still || x == old;
    if (!still) old->consumers.erase(std::remove(old->consumers.begin(), old->consumers.end(), n), old->consumers.end());
  }
  if (v && std::find(v->consumers.begin(), v->consumers.end(), n) == v->consumers.end()) v->consumers.push_back(n);
}

void Graph::replace_uses(Value* from, Value* to) {
  const std::vector<Node*> readers = from->consumers;
  for (Node* n : readers) {
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (n->inputs[i] == from) set_input(n, i, to);
    }
  }
  for (Value*& o : outputs) {
    if (o == from) o = to;
  }
}

void Graph::move_output(Node* from, size_t from_index, Node* to, size_t to_index) {
  Value* v = from->outputs[from_index];
  Value* old = to->outputs[to_index];
  from->outputs[from_index] = nullptr;
  if (old) old->producer = nullptr;
  to->outputs[to_index] = v;
  if (v) v->producer = to;
}

std::string Graph::fresh_name(const std::string& base) const {
  std::string fresh = base;
  for (int k = 1; by_name_.count(fresh); ++k) fresh = base + "_" + std::to_string(k);
  return fresh;
}

Value* Graph::add_constant(const std::string& base, Tensor t) {
  Value* v = *add_value(fresh_name(base));
  v->dtype = t.dtype();
  v->shape = to_dims(t.shape());
  v->constant = std::move(t);
  return v;
}

void Graph::remove_nodes(const std::function<bool(const Node&)>& dead) {
  std::set<const Node*> gone;
  for (const auto& n : nodes_) {
    if (dead(*n)) gone.insert(n.get());
  }
  if (gone.empty()) return;
  std::set<const Value*> gone_values;
  for (const Node* n : gone) {
    for (Value* in : n->inputs) {
      if (!in) continue;
      auto& c = in->consumers;
      c.erase(std::remove(c.begin(), c.end(), n), c.end());
    }
  }
  // Outputs of removed nodes disappear unless something still reads them (or they are graph
  // outputs): those stay, without a producer, so that validate() reports the dangling use
  // instead of a pointer to freed memory.
  std::set<const Value*> graph_outputs(outputs.begin(), outputs.end());
  for (const Node* n : gone) {
    for (Value* o : n->outputs) {
      if (!o) continue;
      o->producer = nullptr;
      if (o->consumers.empty() && !graph_outputs.count(o)) gone_values.insert(o);
    }
  }
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&](const auto& n) { return gone.count(n.get()) > 0; }), nodes_.end());
  for (const Value* v : gone_values) by_name_.erase(v->name);
  values_.erase(std::remove_if(values_.begin(), values_.end(), [&](const auto& v) { return gone_values.count(v.get()) > 0; }), values_.end());
}

void Graph::remove_unused_constants() {
  std::set<const Value*> outs(outputs.begin(), outputs.end());
  std::set<const Value*> gone;
  for (const auto& v : values_) {
    if (v->is_constant() && !v->producer && v->consumers.empty() && !outs.count(v.get())) gone.insert(v.get());
  }
  for (const Value* v : gone) by_name_.erase(v->name);
  values_.erase(std::remove_if(values_.begin(), values_.end(), [&](const auto& v) { return gone.count(v.get()) > 0; }), values_.end());
}

Status Graph::sort_topologically() {
  std::set<const Value*> ready;
  for (const Value* v : inputs) ready.insert(v);
  for (const auto& v : values_) {
    if (v->is_constant() || !v->producer) ready.insert(v.get());
  }
  std::vector<std::unique_ptr<Node>> pending = std::move(nodes_), sorted;
  nodes_.clear();
  while (!pending.empty()) {
    bool progress = false;
    for (auto& n : pending) {
      if (!n) continue;
      bool ok = true;
      for (const Value* v : n->inputs) ok = ok && (!v || ready.count(v));
      if (!ok) continue;
      for (const Value* v : n->outputs) {
        if (v) ready.insert(v);
      }
      sorted.push_back(std::move(n));
      progress = true;
    }
    pending.erase(std::remove(pending.begin(), pending.end(), nullptr), pending.end());
    if (!progress) {
      const std::string who = pending.front()->describe();
      for (auto& n : pending) sorted.push_back(std::move(n));
      nodes_ = std::move(sorted);
      return invalid(who + ": on a cycle (or reads a value nothing produces)");
    }
  }
  nodes_ = std::move(sorted);
  return {};
}

Status Graph::set_node_order(const std::vector<const Node*>& order) {
  if (order.size() != nodes_.size()) {
    return invalid("node order: " + std::to_string(order.size()) + " nodes for a graph of " + std::to_string(nodes_.size()));
  }
  std::map<const Node*, size_t> at;
  for (size_t i = 0; i < nodes_.size(); ++i) at[nodes_[i].get()] = i;
  std::set<const Node*> placed;
  for (const Node* n : order) {
    if (!at.count(n) || placed.count(n))
      return invalid("node order: " + (n ? n->describe() : std::string("null")) + " is not one of the graph's nodes, once");
    for (const Value* v : n->inputs) {
      if (v && v->producer && !placed.count(v->producer))
        return invalid("node order: " + n->describe() + " before the producer of its input '" + v->name + "'");
    }
    placed.insert(n);
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(nodes_.size());
  for (const Node* n : order) sorted.push_back(std::move(nodes_[at.at(n)]));
  nodes_ = std::move(sorted);
  return {};
}

std::vector<const Node*> device_grouped_order(const Graph& g, const std::function<int(const Node&)>& device_of, std::optional<int> start) {
  const auto& nodes = g.nodes();
  std::map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i].get()] = i;
  std::vector<int> pending(nodes.size(), 0), device(nodes.size());
  std::vector<std::vector<size_t>> readers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    device[i] = device_of(*nodes[i]);
    std::set<size_t> producers;
    for (const Value* v : nodes[i]->inputs) {
      if (v && v->producer && index.count(v->producer)) producers.insert(index.at(v->producer));
    }
    pending[i] = static_cast<int>(producers.size());
    for (size_t q : producers) readers[q].push_back(i);
  }
  std::map<int, std::set<size_t>> ready;  // by device; views under -1
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready[std::max(device[i], -1)].insert(i);
  }
  std::optional<int> cur = start;
  std::vector<const Node*> order;
  order.reserve(nodes.size());
  while (order.size() < nodes.size()) {
    std::set<size_t>* from = nullptr;
    if (!ready[-1].empty()) {
      from = &ready[-1];
    } else if (cur && !ready[*cur].empty()) {
      from = &ready[*cur];
    } else {
      // A switch: the device of the earliest ready node.
      for (auto& [d, r] : ready) {
        if (d >= 0 && !r.empty() && (!from || *r.begin() < *from->begin())) {
          from = &r;
          cur = d;
        }
      }
      if (!from) break;  // a cycle
    }
    const size_t i = *from->begin();
    from->erase(from->begin());
    order.push_back(nodes[i].get());
    for (size_t r : readers[i]) {
      if (--pending[r] == 0) ready[std::max(device[r], -1)].insert(r);
    }
  }
  return order;
}

Node* produced_by(const Value* v, const char* op) {
  return v && v->producer && v->producer->op_type == op && v->producer->domain.empty() ? v->producer : nullptr;
}

Status Graph::validate() const {
  std::set<const Value*> defined;
  for (const Value* v : inputs) defined.insert(v);
  for (const auto& v : values_) {
    if (v->is_constant()) defined.insert(v.get());
  }
  for (const auto& n : nodes_) {
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      if (v && !defined.count(v)) {
        return invalid(n->describe() + ": input " + std::to_string(i) + " '" + v->name +
                       "' is not a graph input, a constant or an output of an earlier node");
      }
    }
    for (const Value* v : n->outputs) {
      if (!v) continue;
      if (v->producer != n.get()) return invalid(n->describe() + ": output '" + v->name + "' has another producer");
      defined.insert(v);
    }
  }
  std::set<const Node*> present;
  for (const auto& n : nodes_) present.insert(n.get());
  for (const auto& v : values_) {
    for (const Node* c : v->consumers) {
      if (!present.count(c)) return invalid("value '" + v->name + "' lists a consumer that is not in the graph");
    }
  }
  for (const Value* v : outputs) {
    if (!defined.count(v)) return invalid("graph output '" + v->name + "' is never produced");
  }
  return {};
}

namespace {
std::string value_text(const Value* v) {
  if (!v) return "<omitted>";
  std::string s = "%" + v->name;
  if (v->dtype || v->shape) {
    s += ":";
    s += v->dtype ? dtype_name(*v->dtype) : "?";
    if (v->shape) s += dims_to_string(*v->shape);
  }
  return s;
}

std::string attr_text(const Attribute& a) {
  std::ostringstream o;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
          o << x;
        } else if constexpr (std::is_same_v<T, std::string>) {
          o << '"' << x << '"';
        } else if constexpr (std::is_same_v<T, Tensor>) {
          o << "tensor<" << dtype_name(x.dtype()) << shape_to_string(x.shape()) << ">";
        } else {
          o << "[";
          for (size_t i = 0; i < x.size(); ++i) o << (i ? ", " : "") << x[i];
          o << "]";
        }
      },
      a);
  return o.str();
}
}  // namespace

std::string Graph::dump() const {
  std::ostringstream o;
  o << "graph " << name << " (opset " << opset << ")\n";
  for (const Value* v : inputs) o << "  input  " << value_text(v) << "\n";
  for (const auto& v : values_) {
    if (v->is_constant()) o << "  const  " << value_text(v.get()) << "\n";
  }
  for (const auto& n : nodes_) {
    o << "  ";
    for (size_t i = 0; i < n->outputs.size(); ++i) o << (i ? ", " : "") << value_text(n->outputs[i]);
    o << " = " << (n->domain.empty() ? "" : n->domain + ".") << n->op_type << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) o << (i ? ", " : "") << value_text(n->inputs[i]);
    o << ")";
    if (!n->attrs.empty()) {
      o << " {";
      bool first = true;
      for (const auto& [k, a] : n->attrs) {
        o << (first ? "" : ", ") << k << "=" << attr_text(a);
        first = false;
      }
      o << "}";
    }
    o << "  # " << n->name << "\n";
  }
  for (const Value* v : outputs) o << "  output " << value_text(v) << "\n";
  return o.str();
}

}  // namespace rkd::ir
