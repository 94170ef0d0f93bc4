// The resource limits rkdeploy applies to what it is given, in one place (docs/cli.md,
// "Limits"). Each is checked where data enters, before anything of that size is allocated or
// read, and a breach is an Error that names the file, tensor or model, never an abort.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace rkd {

// One tensor's byte size (64 GiB): a larger shape is refused as invalid (checked_shape_bytes).
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 36;

// A file read whole (a model, a weight shard, a .npy/.npz, a JSON file, a register-command
// buffer): one tensor's limit plus 1 MiB for headers. Only regular files are read; a device,
// FIFO or socket is refused before it is opened for reading (it could block or never end).
inline constexpr uint64_t kMaxFileBytes = kMaxTensorBytes + (uint64_t{1} << 20);

// Under RLIMIT_AS or RLIMIT_DATA, the address space kept free beyond rkdeploy's own estimates:
// the libraries allocate on their own while they prepare and run (oneDNN's generated code and
// scratchpads, thread stacks, malloc arenas), and oneDNN's code generator crashes instead of
// failing when an mmap is refused.
inline constexpr uint64_t kAddressSpaceHeadroomBytes = uint64_t{256} << 20;

// The most CPU threads any caller may ask for (the command line's --threads, the C API's
// options.threads, the Python package's threads=): more workers than this is a typo, and
// creating them can fail at the OS's thread limit after the work has begun. 0 means one per core.
inline constexpr int kMaxThreads = 1024;
// "WHAT N: must be 0 (one per core) to kMaxThreads" (invalid) unless 0 <= threads <= kMaxThreads.
Status check_thread_count(int threads, const std::string& what);

// The largest batch a model may be bound to (a symbolic batch dimension; Python's
// rkdeploy.load(batch=)): beyond it, a typo.
inline constexpr int64_t kMaxBatch = 65536;

// The memory this process may still use: what the kernel reports available now (MemAvailable:
// free memory plus what it can reclaim; physical memory where /proc/meminfo is unreadable);
// under `ulimit -v` / `-d` at most the limit less what is mapped now and
// kAddressSpaceHeadroomBytes.
uint64_t usable_memory_bytes();

// Refuses a run whose working memory, estimated before any of it is allocated, exceeds
// usable_memory_bytes(): "WHAT: needs about N GiB ..." (invalid: a model or input that no
// machine of this size runs).
Status check_memory_estimate(uint64_t bytes, const std::string& what);

}  // namespace rkd
