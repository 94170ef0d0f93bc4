// The lock both modules take per object (a Model, a Runtime): one call at a time, waited for
// without the GIL so that the thread holding the lock can take the GIL back.
#pragma once

#include <pybind11/pybind11.h>

#include <mutex>

namespace rkd_python {

inline std::unique_lock<std::mutex> lock_without_gil(std::mutex& mu) {
  std::unique_lock<std::mutex> lock(mu, std::defer_lock);
  pybind11::gil_scoped_release nogil;
  lock.lock();
  return lock;
}

}  // namespace rkd_python
