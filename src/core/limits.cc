#include "core/limits.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

namespace rkd {

namespace {

uint64_t rlimit_bytes(int resource) {
  struct rlimit r {};
  if (::getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return static_cast<uint64_t>(r.rlim_cur);
}

// The process's mapped address space now (/proc/self/statm's first field), or 0.
uint64_t mapped_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  const int got = std::fscanf(f, "%llu", &pages);
  std::fclose(f);
  const long page = ::sysconf(_SC_PAGESIZE);
  return got == 1 && page > 0 ? pages * static_cast<uint64_t>(page) : 0;
}

std::string size_text(uint64_t bytes) {
  char b[32];
  if (bytes < (uint64_t{10} << 30)) std::snprintf(b, sizeof b, "%.0f MiB", static_cast<double>(bytes) / double(uint64_t{1} << 20));
  else std::snprintf(b, sizeof b, "%.1f GiB", static_cast<double>(bytes) / double(uint64_t{1} << 30));
  return b;
}

// /proc/meminfo's MemAvailable, or nullopt.
std::optional<uint64_t> available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return std::nullopt;
  char line[256];
  std::optional<uint64_t> kib;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  if (!kib) return std::nullopt;
  return *kib * 1024;
}

}  // namespace

Status check_thread_count(int threads, const std::string& what) {
  if (threads >= 0 && threads <= kMaxThreads) return {};
  return invalid(what + " " + std::to_string(threads) + ": must be 0 (one per core) to " + std::to_string(kMaxThreads));
}

uint64_t usable_memory_bytes() {
  // Physical memory does not change while rkdeploy runs (read once); what is available does.
  static const uint64_t physical_total = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
  }();
  const uint64_t physical = available_bytes().value_or(physical_total);
  static const uint64_t address_limit = std::min(rlimit_bytes(RLIMIT_AS), rlimit_bytes(RLIMIT_DATA));
  if (address_limit == UINT64_MAX) return physical;
  // Under `ulimit -v`/`-d`: what is left of the limit after the mappings made so far and the
  // headroom for the libraries' own allocations (oneDNN's generated code and scratchpads, thread
  // stacks and malloc arenas), which some of them do not survive running out of.
  const uint64_t taken = mapped_bytes() + kAddressSpaceHeadroomBytes;
  return std::min(physical, address_limit > taken ? address_limit - taken : 0);
}

Status check_memory_estimate(uint64_t bytes, const std::string& what) {
  const uint64_t usable = usable_memory_bytes();
  if (bytes <= usable) return {};
  return invalid(what + ": needs about " + size_text(bytes) + " of memory, more than the " + size_text(usable) +
                 " this process may use (the memory available now; under ulimit -v or -d, what the limit leaves after rkdeploy's own " +
                 size_text(mapped_bytes()) + " and " + size_text(kAddressSpaceHeadroomBytes) + " of headroom for its libraries)");
}

}  // namespace rkd
