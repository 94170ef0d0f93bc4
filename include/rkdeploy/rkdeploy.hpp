// C++ over the C API of rkdeploy.h (header-only, nothing but the C calls): a Model owns an
// rkd_model, every failed call throws rkdeploy::Error carrying the status and the message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rkdeploy/rkdeploy.h"

namespace rkdeploy {

class Error : public std::runtime_error {
 public:
  Error(rkd_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  rkd_status status() const { return status_; }

 private:
  rkd_status status_;
};

inline void check(rkd_status s) {
  if (s != RKD_OK) throw Error(s, rkd_last_error());
}

struct Options : rkd_options {
  Options() { rkd_options_init(this); }
};

class Model {
 public:
  explicit Model(const std::string& path, const Options& options = Options()) { check(rkd_open(path.c_str(), &options, &m_)); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    std::swap(m_, o.m_);
    return *this;
  }
  ~Model() { rkd_close(m_); }

  size_t input_count() const { return rkd_input_count(m_); }
  size_t output_count() const { return rkd_output_count(m_); }
  rkd_tensor_info input_info(size_t i) const {
    rkd_tensor_info info;
    check(rkd_input_info(m_, i, &info));
    return info;
  }
  rkd_tensor_info output_info(size_t i) const {
    rkd_tensor_info info;
    check(rkd_output_info(m_, i, &info));
    return info;
  }
  size_t input_index(const std::string& name) const {
    size_t i = 0;
    check(rkd_find_input(m_, name.c_str(), &i));
    return i;
  }
  size_t output_index(const std::string& name) const {
    size_t i = 0;
    check(rkd_find_output(m_, name.c_str(), &i));
    return i;
  }
  // The input's buffer, read in place by run().
  template <typename T>
  T* input_buffer(size_t i) {
    void* p = nullptr;
    check(rkd_input_buffer(m_, i, &p));
    return static_cast<T*>(p);
  }
  void set_input(size_t i, const void* data, size_t bytes) { check(rkd_set_input(m_, i, data, bytes)); }
  void set_image(const uint8_t* rgb, int width, int height) { check(rkd_set_image(m_, rgb, width, height)); }
  void set_image_file(const std::string& path) { check(rkd_set_image_file(m_, path.c_str())); }
  void run() { check(rkd_run(m_)); }
  // The last run's output i, in place: valid until the next run().
  template <typename T>
  const T* output(size_t i, size_t* bytes = nullptr) const {
    const void* p = nullptr;
    size_t n = 0;
    check(rkd_output(m_, i, &p, &n));
    if (bytes) *bytes = n;
    return static_cast<const T*>(p);
  }
  std::vector<rkd_detection> detections() const {
    size_t count = 0;
    check(rkd_detections(m_, nullptr, 0, &count));
    std::vector<rkd_detection> d(count);
    check(rkd_detections(m_, d.data(), d.size(), &count));
    return d;
  }
  rkd_model* get() const { return m_; }

 private:
  rkd_model* m_ = nullptr;
};

}  // namespace rkdeploy
