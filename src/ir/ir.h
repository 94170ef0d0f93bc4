// The model IR: a graph of nodes and values.
//
// Contract:
//  - A Graph owns its Values and Nodes; Value* and Node* stay valid until the graph is
//    destroyed (they are never moved). nodes() is in topological order (every input of a
//    node is a graph input, a constant or an output of an earlier node); validate() checks it.
//  - A Value has a name unique in the graph, a dtype and a shape when known (dims are
//    static sizes or named symbols, e.g. "N" for a dynamic batch), an optional constant
//    (initializers), one producer (or none: graph inputs and constants) and its consumers.
//  - Optional inputs and outputs of a node that are omitted are nullptr in inputs/outputs,
//    at their position (ONNX's empty names).
//  - Attributes keep ONNX's kinds: int, float, string, ints, floats, strings, tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"

namespace rkd::ir {

struct Dim {
  int64_t value = -1;  // >= 0: static size
  std::string symbol;  // when value < 0: the symbol ("" = unknown)
  bool is_static() const { return value >= 0; }
  std::string to_string() const { return is_static() ? std::to_string(value) : (symbol.empty() ? "?" : symbol); }
};
using Dims = std::vector<Dim>;
inline Dims to_dims(const Shape& s) {  // all static
  Dims d;
  for (int64_t x : s) d.push_back(Dim{x, ""});
  return d;
}
std::string dims_to_string(const Dims& d);  // "[N, 3, 640, 640]"

class Node;

class Value {
 public:
  std::string name;
  std::optional<DType> dtype;      // nullopt: unknown
  std::optional<Dims> shape;       // nullopt: unknown rank
  std::optional<Tensor> constant;  // initializers (and folded constants)
  Node* producer = nullptr;
  std::vector<Node*> consumers;

  bool is_constant() const { return constant.has_value(); }
  // Static element count (INT64_MAX when it overflows), or nullopt when any dim is unknown.
  std::optional<int64_t> static_numel() const;
};

using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, std::vector<std::string>, Tensor>;

class Node {
 public:
  std::string name;
  std::string op_type;
  std::string domain;           // "" = the default ONNX domain
  std::vector<Value*> inputs;   // nullptr = omitted optional input
  std::vector<Value*> outputs;  // nullptr = omitted optional output
  std::map<std::string, Attribute> attrs;

  // Typed attribute access: the default when absent; an Error when present with another kind.
  Result<int64_t> attr_int(const std::string& key, int64_t fallback) const;
  Result<float> attr_float(const std::string& key, float fallback) const;
  Result<std::string> attr_string(const std::string& key, const std::string& fallback) const;
  Result<std::vector<int64_t>> attr_ints(const std::string& key, const std::vector<int64_t>& fallback) const;
  // "node 'name' (OpType)" for error messages.
  std::string describe() const;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  // Creates a value; fails if the name is taken.
  Result<Value*> add_value(const std::string& name);
  Value* find(const std::string& name) const;
  // Gives v a new name; fails if the name is taken.
  Status rename_value(Value* v, const std::string& name);
  // Appends a node (inputs must exist already; outputs are created and must be new). On
  // failure the graph is unchanged.
  Result<Node*> add_node(const std::string& name, const std::string& op_type, const std::string& domain, const std::vector<Value*>& inputs,
                         const std::vector<std::string>& output_names);

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }
  std::vector<Value*> inputs;   // graph inputs (not constants)
  std::vector<Value*> outputs;  // graph outputs

  int64_t opset = 0;     // default-domain opset
  std::string producer;  // producer_name + version of the file
  std::string name;
  // Model-level facts passes read. "rkdeploy.requant": the integer requantization convention
  // of the source format (quant::Requant name; absent = ONNX Runtime's), set by the TFLite
  // importer and read by qdq-to-qlinear. "rkdeploy.npu" (any value): the graph is compiled
  // for the NPU (runtime CompileOptions::npu_strategy), so qdq-to-qlinear gives
  // the sites the NPU computes in its own integer form that form under every convention
  // (quant/qlinear_lut.h: the linear Resizes by 2 and by 1/2).
  std::map<std::string, std::string> metadata;

  // Points input i of n at v (nullptr = omitted), keeping consumer lists right.
  void set_input(Node* n, size_t i, Value* v);
  // Makes every reader of `from` (node inputs and graph outputs) read `to` instead.
  void replace_uses(Value* from, Value* to);
  // Makes `to` produce the value `from` produces at output `from_index` (its name and its
  // readers stay); the value `to` produced at `to_index` is detached (no producer). What a
  // fusion does when node `to` replaces a chain that ended at `from`.
  void move_output(Node* from, size_t from_index, Node* to, size_t to_index);
  // Creates a constant value with a fresh name derived from `base`.
  Value* add_constant(const std::string& base, Tensor t);
  // `base`, or `base`_K with the smallest K >= 1 that no value has.
  std::string fresh_name(const std::string& base) const;

  // Removes the nodes for which `dead` is true and their entries in the consumer lists of
  // their inputs. Their output values are removed too, except those still read by another
  // node or listed as graph outputs: those remain without a producer, and validate()
  // reports them.
  void remove_nodes(const std::function<bool(const Node&)>& dead);
  // Removes constant values that no node reads and that are not graph outputs.
  void remove_unused_constants();

  // Reorders nodes topologically (stable: keeps the current order where it is valid);
  // fails naming a node on a cycle.
  Status sort_topologically();
  // Puts the nodes in `order`, which must hold every node once, each after the producers of its
  // inputs; else fails naming the node, and the order is unchanged.
  Status set_node_order(const std::vector<const Node*>& order);

  // Checks topological order, producer/consumer links, unique names, and that every graph
  // output is defined. Errors name the node and value.
  Status validate() const;
  // Human-readable text form of the whole graph (for --dump-after and tests).
  std::string dump() const;

 private:
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, Value*> by_name_;
};

// A topological order of g that keeps each device's nodes together (a serial schedule that
// switches devices only when it must): the next node is a ready view (device_of < 0: it does no
// work and joins any run), else a ready node of the current device, else - a switch - the
// earliest ready node (in g's order) and its device. `start`: the device to begin on (none: the
// earliest ready node's). Ties go to the earlier node. Fewer nodes than g's when g has a cycle.
// The planner's schedule of a variant and the runtime's npu-schedule are this order.
std::vector<const Node*> device_grouped_order(const Graph& g, const std::function<int(const Node&)>& device_of,
                                              std::optional<int> start = std::nullopt);

// v's producer when it is a default-domain node of type `op`, else nullptr (pattern matching).
Node* produced_by(const Value* v, const char* op);

}  // namespace rkd::ir
