// NumPy .npy and .npz files.
//
// Reading accepts format versions 1.0, 2.0 and 3.0, little-endian ('<', '=' or '|')
// descriptors of the dtypes rkdeploy has (f4 f2 i1 u1 i2 i4 i8 b1), C order, any rank,
// and rejects everything else (big-endian, Fortran order, object arrays, structured
// dtypes, truncated data, trailing garbage in the header) with an Error naming the file
// and the field. A file's declared shape is checked against kMaxTensorBytes and against
// the bytes actually present before anything is allocated.
//
// Writing produces version 1.0 (or 2.0 when the header needs it), C order, and goes
// through a temporary file in the destination folder that is renamed over the target,
// so a failed write never leaves a partial file behind and never damages an existing one.
//
// .npz: a zip archive of NAME.npy members, stored or deflated (numpy.savez and
// savez_compressed); read and written with libzip.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>

#include "core/result.h"
#include "core/tensor.h"

namespace rkd {

// Parses .npy bytes; `what` names the source in error messages (a file name).
Result<Tensor> parse_npy(std::span<const uint8_t> bytes, const std::string& what);
// Serialises a tensor (any view; written in C order). bfloat16 has no NumPy descriptor
// and is refused as unsupported.
Result<std::string> serialize_npy(const Tensor& t);

Result<Tensor> read_npy(const std::string& path);
Status write_npy(const std::string& path, const Tensor& t);

using TensorMap = std::map<std::string, Tensor>;
Result<TensorMap> parse_npz(std::span<const uint8_t> bytes, const std::string& what);
Result<TensorMap> read_npz(const std::string& path);
Status write_npz(const std::string& path, const TensorMap& tensors, bool compress = false);

// File helpers shared by every reader and writer in rkdeploy.
// The whole of a regular file of at most `max_bytes` (core/limits.h); a directory is an I/O
// error, a device, FIFO or socket and a larger file are invalid, refused before any read.
Result<std::string> read_file_bytes(const std::string& path, uint64_t max_bytes = kMaxFileBytes);
// `count` bytes of a regular file from `offset` (ONNX external data); a file too short for
// them is invalid.
Result<std::string> read_file_range(const std::string& path, uint64_t offset, uint64_t count);
// Whether `inner` is `outer` or lies below it, comparing the paths' elements as written (make
// both absolute and normal, or canonical, first).
bool path_is_within(const std::filesystem::path& inner, const std::filesystem::path& outer);
// `relative`, a path a model names (ONNX external data, TF.js weight shards), inside `folder`:
// refused (invalid, naming `what`) when it is absolute, climbs with "..", or ends outside the
// folder once symbolic links are resolved. Returns folder/relative.
Result<std::string> path_inside_folder(const std::string& folder, const std::string& relative, const std::string& what);
// Writes `bytes` to `path` via a temporary file + rename (atomic on POSIX file systems).
Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace rkd
