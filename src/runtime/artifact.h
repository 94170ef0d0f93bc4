// rkdeploy's deployable artifact (.rkd; format in docs/artifact.md, schema artifact.fbs): one
// file holding the graph the runtime executes - every rewrite done, the NPU nodes placed - and
// the NPU's device memory as compile lowered it (weights, operands, register commands).
//
// Contract:
//  - serialize_artifact writes the graph as it is (values with dtype, dims and constants; nodes
//    with their attributes; inputs, outputs, opset, metadata) and the other fields; a graph
//    holding a value without a name, or a tensor over 2 GiB, is refused.
//  - serialize_artifact ends by writing the file's SHA-256 (computed with the digest field's 32
//    bytes as zeros) into that field.
//  - parse_artifact trusts nothing: the FlatBuffers verifier first (file identifier "RKD1",
//    bounds, nesting), then format_version == kArtifactFormatVersion, then the digest (a file
//    edited or damaged anywhere is refused: no part is trusted because a later check might
//    not see it), then every field - dtype
//    names known, a constant's bytes = its element count x its type's size, static dims >= 0,
//    node inputs and outputs indices of values (-1: omitted), each value produced once, an
//    attribute's payload of its kind, graph inputs and outputs values - and Graph::validate()
//    (topological order, unique names), then ir::verify_declared_shapes (every node's output
//    types and shapes derived again from its inputs and attributes equal the declared ones:
//    the executor sizes its buffers from them). Errors are invalid, name `what` and the field
//    ("model.rkd: node 12 'conv': input 3: value index 9000 of 812 values").
//  - A parsed graph is the one serialized: dump() of both is the same text.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::runtime {

inline constexpr uint32_t kArtifactFormatVersion = 2;

struct Artifact {
  uint32_t format_version = kArtifactFormatVersion;
  std::string written_by;    // "rkdeploy VERSION"
  std::string source_model;  // the file compile read (its file name)
  std::string target;        // the NPU (npu::arch's name)
  std::string strategy;      // the convolutions' per-axis strategy
  bool mainline = false;     // lowered for a mainline rocket device (no PPU-only tasks)
  // The NPU nodes' device memory once every node is lowered: device_size bytes from device_base,
  // the runs of non-zero bytes in address order (zeros between them: input, output and scratch
  // buffers before the first run).
  struct Chunk {
    uint64_t offset = 0;
    std::vector<uint8_t> bytes;
  };
  uint64_t device_base = 0;
  uint64_t device_size = 0;
  std::vector<Chunk> device_chunks;
  std::string preprocess;  // a detector config's JSON, or empty
};

// The device memory `image` as an artifact's chunks (runs of non-zero bytes, split at runs of
// 64 zeros or more).
std::vector<Artifact::Chunk> device_chunks_of(std::span<const uint8_t> image);
// The first byte where `memory` differs from the artifact's device memory (a size that differs:
// the shorter one's size), or nullopt when they are equal.
std::optional<uint64_t> device_memory_difference(const Artifact& a, std::span<const uint8_t> memory);

// An artifact as read: its fields and the graph.
struct LoadedArtifact {
  Artifact info;
  std::unique_ptr<ir::Graph> graph;
};

Result<std::vector<uint8_t>> serialize_artifact(const Artifact& a, const ir::Graph& g);
// Writes the SHA-256 digest of `bytes` (a serialized artifact, 8-byte aligned) into its digest
// field: what serialize_artifact does last. Tests and the fuzz target use it to make an edited
// artifact pass the digest, so that the checks behind it are reached.
Status stamp_artifact_digest(std::vector<uint8_t>& bytes);
// verify_shapes false: the format alone (everything but ir::verify_declared_shapes), for tests of
// the format on graphs that are not models.
Result<LoadedArtifact> parse_artifact(std::span<const uint8_t> bytes, const std::string& what, bool verify_shapes = true);
// parse_artifact of a file's bytes; errors name the path.
Result<LoadedArtifact> read_artifact(const std::string& path);
// Whether `path` names an artifact by its extension (".rkd").
bool is_artifact_path(const std::string& path);

}  // namespace rkd::runtime
