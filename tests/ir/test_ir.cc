// IR graph invariants, the pass manager's contract and dead-code elimination.
#include <gtest/gtest.h>

#include "ir/ir.h"
#include "ir/pass.h"
#include "ir/passes/fold.h"
#include "ir/passes/shape_inference.h"

namespace rkd::ir {
namespace {

// x -> Relu -> a -> Add(a, c) -> y (output); x -> Neg -> dead1 -> Exp -> dead2 (unused);
// constants c (used) and u (unused).
Graph sample_graph() {
  Graph g;
  g.opset = 17;
  Value* x = *g.add_value("x");
  x->dtype = DType::f32;
  x->shape = Dims{Dim{-1, "N"}, Dim{4, ""}};
  g.inputs.push_back(x);
  Value* c = *g.add_value("c");
  c->constant = Tensor::from_floats({4}, std::vector<float>{1, 2, 3, 4});
  c->dtype = DType::f32;
  c->shape = Dims{Dim{4, ""}};
  Value* u = *g.add_value("u");
  u->constant = Tensor::from_floats({1}, std::vector<float>{9});
  Node* relu = *g.add_node("relu", "Relu", "", {x}, {"a"});
  (void)*g.add_node("add", "Add", "", {relu->outputs[0], c}, {"y"});
  Node* neg = *g.add_node("neg", "Neg", "", {x}, {"dead1"});
  (void)*g.add_node("exp", "Exp", "", {neg->outputs[0]}, {"dead2"});
  g.outputs.push_back(g.find("y"));
  return g;
}

TEST(Graph, ValidatesAndDumps) {
  Graph g = sample_graph();
  ASSERT_TRUE(g.validate().ok()) << g.validate().error().to_string();
  EXPECT_EQ(g.find("x")->consumers.size(), 2u);
  const std::string d = g.dump();
  EXPECT_NE(d.find("input  %x:float32[N, 4]"), std::string::npos) << d;
  EXPECT_NE(d.find("%y = Add(%a, %c:float32[4])  # add"), std::string::npos) << d;
  EXPECT_NE(d.find("const  %c:float32[4]"), std::string::npos) << d;
  EXPECT_FALSE(g.add_value("x").ok());  // names are unique
  const size_t nodes_before = g.nodes().size();
  EXPECT_FALSE(g.add_node("dup", "Relu", "", {g.find("x")}, {"fresh", "a"}).ok());  // output already defined
  EXPECT_EQ(g.nodes().size(), nodes_before);                                        // unchanged on failure
  EXPECT_EQ(g.find("fresh"), nullptr);
  EXPECT_EQ(g.find("x")->consumers.size(), 2u);
}

TEST(Graph, ValidateNamesTheNodeThatBreaksTopologicalOrder) {
  Graph g;
  Value* x = *g.add_value("x");
  g.inputs.push_back(x);
  Value* late = *g.add_value("late");  // neither input, constant nor produced earlier
  (void)*g.add_node("uses_late", "Relu", "", {late}, {"y"});
  g.outputs.push_back(g.find("y"));
  auto s = g.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("node 'uses_late' (Relu): input 0 'late'"), std::string::npos) << s.error().message;
}

TEST(Passes, DeadCodeEliminationKeepsWhatReachesAnOutput) {
  Graph g = sample_graph();
  PassManager pm;
  pm.add(dead_code_elimination_pass());
  std::string dumped;
  PassOptions opt;
  opt.dump_after = {"dead-code-elimination"};
  opt.dump = [&](const std::string& pass, const std::string& ir) { dumped = pass + "\n" + ir; };
  ASSERT_TRUE(pm.run(g, opt).ok());
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0]->name, "relu");
  EXPECT_EQ(g.nodes()[1]->name, "add");
  EXPECT_EQ(g.find("dead1"), nullptr);
  EXPECT_EQ(g.find("u"), nullptr);  // unused constant removed
  EXPECT_NE(g.find("c"), nullptr);  // used constant kept
  EXPECT_EQ(g.find("x")->consumers.size(), 1u);
  EXPECT_TRUE(g.validate().ok());
  EXPECT_EQ(dumped.rfind("dead-code-elimination\ngraph", 0), 0u) << dumped;
  EXPECT_EQ(dumped.find("Neg"), std::string::npos);
}

TEST(Passes, FailuresNameThePassAndUnknownDumpNamesAreErrors) {
  Graph g = sample_graph();
  PassManager pm;
  pm.add(Pass{"always-fails", [](Graph& gr) -> Status { return invalid(gr.nodes()[0]->describe() + ": cannot do this"); }});
  auto s = pm.run(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "pass 'always-fails': node 'relu' (Relu): cannot do this");
  PassOptions opt;
  opt.dump_after = {"no-such-pass"};
  s = pm.run(g, opt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("no pass named 'no-such-pass' (passes: always-fails)"), std::string::npos);
  // A pass that breaks the graph is caught by the validation after it.
  PassManager breaker;
  breaker.add(Pass{"drop-relu", [](Graph& gr) -> Status {
                     gr.remove_nodes([](const Node& n) { return n.op_type == "Relu"; });
                     return {};
                   }});
  Graph g2 = sample_graph();
  s = breaker.run(g2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("pass 'drop-relu' left an invalid graph"), std::string::npos) << s.error().message;
}

TEST(AutoPad, ResolvesEveryModeAsOnnxDefinesIt) {
  // Expected pads worked out by hand from the ONNX definition: total = max(0, (ceil(in /
  // stride) - 1) stride + (k - 1) dilation + 1 - in); UPPER puts the odd unit at the end.
  struct Case {
    std::string mode;
    WindowGeometry g;
    std::vector<int64_t> want;
  };
  const std::vector<Case> cases = {
      {"SAME_UPPER", {{7, 8}, {3, 3}, {2, 2}, {1, 1}, {}, false}, {1, 0, 1, 1}},  // totals 2 and 1
      {"SAME_LOWER", {{7, 8}, {3, 3}, {2, 2}, {1, 1}, {}, false}, {1, 1, 1, 0}},
      {"SAME_UPPER", {{5}, {3}, {1}, {2}, {}, false}, {2, 2}},  // dilated k = 5
      {"SAME_UPPER", {{4}, {1}, {4}, {1}, {}, false}, {0, 0}},  // total clamps at 0
      {"SAME_UPPER", {{3}, {4}, {2}, {1}, {1}, true}, {1, 2}},  // 2*2 + 1 + 4 - 6 = 3
      {"SAME_LOWER", {{3}, {4}, {2}, {1}, {}, true}, {1, 1}},   // 4 + 4 - 6 = 2
      {"VALID", {{7}, {3}, {2}, {1}, {}, false}, {0, 0}},
      {"NOTSET", {{7}, {3}, {2}, {1}, {}, false}, {4, 5}},  // kept
  };
  for (const Case& c : cases) {
    std::vector<int64_t> pads(c.want.size(), 0);
    if (c.mode == "NOTSET" || c.mode == "VALID") pads = {4, 5};
    const Status st = resolve_auto_pad(c.mode, c.g, pads);
    ASSERT_TRUE(st.ok()) << c.mode << ": " << st.error().message;
    EXPECT_EQ(pads, c.want) << c.mode << " in " << c.g.in[0];
  }
  std::vector<int64_t> pads{0, 0};
  const Status bad = resolve_auto_pad("SAME", WindowGeometry{{7}, {3}, {1}, {1}, {}, false}, pads);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown auto_pad 'SAME'"), std::string::npos);
  EXPECT_FALSE(resolve_auto_pad("SAME_UPPER", WindowGeometry{{7, 7}, {3}, {1}, {1}, {}, false}, pads).ok());  // lengths
}

}  // namespace
}  // namespace rkd::ir
