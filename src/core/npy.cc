#include "core/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace rkd {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string errno_text() { return std::strerror(errno); }

// Minimal, strict parser for the header dictionary numpy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Keys may come in any order; each of the three must appear exactly once.
class HeaderParser {
 public:
  HeaderParser(std::string_view s, const std::string& what) : s_(s), what_(what) {}

  Status parse(std::string* descr, bool* fortran, Shape* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    if (!eat('{')) return fail("header does not start with '{'");
    while (true) {
      skip_ws();
      if (eat('}')) break;
      std::string key;
      RKD_TRY(parse_string(&key));
      skip_ws();
      if (!eat(':')) return fail("expected ':' after key '" + key + "'");
      skip_ws();
      if (key == "descr") {
        if (have_descr) return fail("duplicate key 'descr'");
        have_descr = true;
        RKD_TRY(parse_string(descr));
      } else if (key == "fortran_order") {
        if (have_fortran) return fail("duplicate key 'fortran_order'");
        have_fortran = true;
        if (s_.substr(pos_, 4) == "True") {
          *fortran = true;
          pos_ += 4;
        } else if (s_.substr(pos_, 5) == "False") {
          *fortran = false;
          pos_ += 5;
        } else {
          return fail("field 'fortran_order' must be True or False");
        }
      } else if (key == "shape") {
        if (have_shape) return fail("duplicate key 'shape'");
        have_shape = true;
        RKD_TRY(parse_shape(shape));
      } else {
        return fail("unknown header key '" + key + "'");
      }
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat('}')) break;
      return fail("expected ',' or '}' in header");
    }
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected characters after the header dictionary");
    if (!have_descr) return fail("header has no 'descr'");
    if (!have_fortran) return fail("header has no 'fortran_order'");
    if (!have_shape) return fail("header has no 'shape'");
    return {};
  }

 private:
  Error fail(const std::string& msg) const { return invalid(what_ + ": .npy header: " + msg); }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status parse_string(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return fail("expected a quoted string");
    const char q = s_[pos_++];
    const size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return fail("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return {};
  }
  Status parse_shape(Shape* shape) {
    if (!eat('(')) return fail("field 'shape' must be a tuple");
    shape->clear();
    while (true) {
      skip_ws();
      if (eat(')')) break;
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
        return fail("field 'shape' must hold non-negative integers");
      }
      uint64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        v = v * 10 + static_cast<uint64_t>(s_[pos_] - '0');
        if (v > (uint64_t{1} << 62)) return fail("a dimension of 'shape' is too large");
        ++pos_;
      }
      if (eat('L')) {  // Python 2 long suffix
      }
      shape->push_back(static_cast<int64_t>(v));
      if (shape->size() > 32) return fail("field 'shape' has more than 32 dimensions");
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat(')')) break;
      return fail("expected ',' or ')' in 'shape'");
    }
    return {};
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

Result<DType> dtype_from_descr(const std::string& d, const std::string& what) {
  if (d.size() < 2) return invalid(what + ": .npy header: field 'descr' '" + d + "' is not a dtype");
  const char order = d[0];
  const std::string code = d.substr(1);
  if (order == '>') {
    return unsupported(what + ": .npy header: big-endian descr '" + d + "' (only little-endian is read)");
  }
  if (order != '<' && order != '|' && order != '=') {
    return unsupported(what + ": .npy header: descr '" + d + "' (structured or unknown dtype)");
  }
  if (code == "f4") return DType::f32;
  if (code == "f2") return DType::f16;
  if (code == "i1") return DType::i8;
  if (code == "u1") return DType::u8;
  if (code == "i2") return DType::i16;
  if (code == "i4") return DType::i32;
  if (code == "i8") return DType::i64;
  if (code == "b1") return DType::b8;
  return unsupported(what + ": .npy header: descr '" + d +
                     "' is not a dtype rkdeploy reads "
                     "(float32, float16, int8, uint8, int16, int32, int64, bool)");
}

Result<std::string> descr_of(DType t) {
  switch (t) {
    case DType::f32: return std::string("<f4");
    case DType::f16: return std::string("<f2");
    case DType::i8: return std::string("|i1");
    case DType::u8: return std::string("|u1");
    case DType::i16: return std::string("<i2");
    case DType::i32: return std::string("<i4");
    case DType::i64: return std::string("<i8");
    case DType::b8: return std::string("|b1");
    case DType::bf16: break;
  }
  return unsupported("bfloat16 has no NumPy .npy descriptor; convert to float32 or float16 first");
}

}  // namespace

Result<Tensor> parse_npy(std::span<const uint8_t> bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    return invalid(what + ": not a .npy file (magic string \\x93NUMPY missing)");
  }
  const uint8_t major = bytes[6];
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid(what + ": truncated .npy header");
    header_len = static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8) | (static_cast<size_t>(bytes[10]) << 16) |
                 (static_cast<size_t>(bytes[11]) << 24);
    header_start = 12;
  } else {
    return unsupported(what + ": .npy format version " + std::to_string(major) + "." + std::to_string(bytes[7]) + " (versions 1, 2 and 3 are read)");
  }
  if (header_len > bytes.size() - header_start) {
    return invalid(what + ": .npy header length " + std::to_string(header_len) + " runs past the end of the file (" + std::to_string(bytes.size()) +
                   " bytes)");
  }
  std::string_view header(reinterpret_cast<const char*>(bytes.data()) + header_start, header_len);
  std::string descr;
  bool fortran = false;
  Shape shape;
  HeaderParser parser(header, what);
  RKD_TRY(parser.parse(&descr, &fortran, &shape));
  RKD_ASSIGN(DType dtype, dtype_from_descr(descr, what));
  if (fortran) return unsupported(what + ": .npy array in Fortran order (only C order is read)");
  RKD_ASSIGN(uint64_t nbytes, checked_shape_bytes(shape, dtype, what));
  const size_t data_start = header_start + header_len;
  const size_t avail = bytes.size() - data_start;
  if (avail < nbytes) {
    return invalid(what + ": .npy data is truncated: shape " + shape_to_string(shape) + " of " + dtype_name(dtype) + " needs " +
                   std::to_string(nbytes) + " bytes, file has " + std::to_string(avail));
  }
  if (avail > nbytes) {
    return invalid(what + ": .npy file has " + std::to_string(avail - nbytes) + " bytes after the array data");
  }
  RKD_ASSIGN(Tensor t, Tensor::zeros(dtype, shape));
  if (nbytes) std::memcpy(t.raw(), bytes.data() + data_start, static_cast<size_t>(nbytes));
  if (dtype == DType::b8) {
    uint8_t* p = t.data<uint8_t>();
    for (uint64_t i = 0; i < nbytes; ++i) {
      if (p[i] > 1) return invalid(what + ": .npy bool array holds a byte other than 0 or 1");
    }
  }
  return t;
}

Result<std::string> serialize_npy(const Tensor& t) {
  RKD_ASSIGN(std::string descr, descr_of(t.dtype()));
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < t.rank(); ++i) {
    dict += std::to_string(t.dim(i));
    if (t.rank() == 1 || i + 1 < t.rank()) dict += ",";
    if (i + 1 < t.rank()) dict += " ";
  }
  dict += "), }";
  // Pad so that magic + lengths + header is a multiple of 64, ending in '\n'.
  const bool v2 = dict.size() + 11 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + dict.size() + 1;
  const size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const size_t hl = dict.size();
  out += static_cast<char>(hl & 0xff);
  out += static_cast<char>((hl >> 8) & 0xff);
  if (v2) {
    out += static_cast<char>((hl >> 16) & 0xff);
    out += static_cast<char>((hl >> 24) & 0xff);
  }
  out += dict;
  const Tensor c = t.contiguous();
  out.append(static_cast<const char*>(c.raw()), c.nbytes());
  return out;
}

namespace {

// An open regular file, closed on destruction.
struct RegularFile {
  int fd = -1;
  uint64_t size = 0;
  RegularFile() = default;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile() {
    if (fd >= 0) ::close(fd);
  }
};

// O_NONBLOCK: opening a FIFO for reading must not wait for a writer (a regular file's reads
// ignore the flag); what is not a regular file is refused before any read.
Status open_regular(const std::string& path, RegularFile& f) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) return io_error(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return io_error(path + ": cannot read its status: " + errno_text());
  if (S_ISDIR(st.st_mode)) return io_error(path + ": is a directory");
  if (!S_ISREG(st.st_mode)) {
    return invalid(path + ": is not a regular file (a device, FIFO or socket); rkdeploy reads only regular files (docs/cli.md, \"Limits\")");
  }
  f.size = static_cast<uint64_t>(st.st_size);
  return {};
}

// Up to `count` bytes from `offset`; fewer only where the file ends first.
Result<std::string> read_at(const std::string& path, const RegularFile& f, uint64_t offset, uint64_t count) {
  std::string out(static_cast<size_t>(count), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t r = ::pread(f.fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return io_error(path + ": read error: " + errno_text());
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

}  // namespace

bool path_is_within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

Result<std::string> read_file_bytes(const std::string& path, uint64_t max_bytes) {
  RegularFile f;
  RKD_TRY(open_regular(path, f));
  if (f.size > max_bytes) {
    return invalid(path + ": has " + std::to_string(f.size) + " bytes, more than the " + std::to_string(max_bytes) +
                   " a file read whole may have (docs/cli.md, \"Limits\")");
  }
  return read_at(path, f, 0, f.size);  // a file shortened while being read: what is there
}

Result<std::string> read_file_range(const std::string& path, uint64_t offset, uint64_t count) {
  RegularFile f;
  RKD_TRY(open_regular(path, f));
  if (count > kMaxFileBytes) return invalid(path + ": a read of " + std::to_string(count) + " bytes is more than the limit of a file");
  if (offset > f.size || f.size - offset < count) {
    return invalid(path + ": has " + std::to_string(f.size) + " bytes, too few for offset " + std::to_string(offset) + " + " + std::to_string(count));
  }
  RKD_ASSIGN(std::string out, read_at(path, f, offset, count));
  if (out.size() != count) return io_error(path + ": shortened while being read");
  return out;
}

Result<std::string> path_inside_folder(const std::string& folder, const std::string& relative, const std::string& what) {
  const fs::path rel(relative);
  const bool climbs = std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; });
  if (rel.empty() || rel.is_absolute() || climbs) return invalid(what + ": '" + relative + "' leaves the model's folder");
  const fs::path dir(folder.empty() ? "." : folder);
  const fs::path full = dir / rel;
  std::error_code ec;
  const fs::path real_dir = fs::canonical(dir, ec);
  if (ec) return io_error(what + ": the folder '" + dir.string() + "': " + ec.message());
  const fs::path real = fs::canonical(full, ec);
  if (ec) return io_error(what + ": '" + full.string() + "': " + ec.message());
  if (!path_is_within(real, real_dir)) {
    return invalid(what + ": '" + relative + "' leaves the model's folder through a symbolic link (it is " + real.string() + ")");
  }
  return full.string();
}

Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error(path + ": cannot create a temporary file beside it: " + errno_text());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const std::string e = errno_text();
      ::close(fd);
      ::unlink(tmpl.c_str());
      return io_error(path + ": write failed: " + e);
    }
    done += static_cast<size_t>(w);
  }
  ::fchmod(fd, 0644);
  if (::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    return io_error(path + ": close failed: " + errno_text());
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string e = errno_text();
    ::unlink(tmpl.c_str());
    return io_error(path + ": rename failed: " + e);
  }
  return {};
}

Result<Tensor> read_npy(const std::string& path) {
  RKD_ASSIGN(std::string bytes, read_file_bytes(path));
  return parse_npy(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path);
}

Status write_npy(const std::string& path, const Tensor& t) {
  auto s = serialize_npy(t);
  if (!s.ok()) return s.error().with_context(path);
  return write_file_atomic(path, std::span(reinterpret_cast<const uint8_t*>(s->data()), s->size()));
}

namespace {
struct ZipCloser {
  void operator()(zip_t* z) const {
    if (z) zip_discard(z);
  }
};
}  // namespace

Result<TensorMap> parse_npz(std::span<const uint8_t> bytes, const std::string& what) {
  zip_error_t zerr;
  zip_error_init(&zerr);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &zerr);
  if (!src) return invalid(what + ": cannot read .npz: " + zip_error_strerror(&zerr));
  zip_t* raw = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
  if (!raw) {
    zip_source_free(src);
    std::string msg = zip_error_strerror(&zerr);
    zip_error_fini(&zerr);
    return invalid(what + ": not a valid .npz (zip) archive: " + msg);
  }
  std::unique_ptr<zip_t, ZipCloser> z(raw);
  TensorMap out;
  const zip_int64_t n = zip_get_num_entries(z.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) {
      return invalid(what + ": .npz entry " + std::to_string(i) + " is unreadable");
    }
    std::string name = st.name ? st.name : "";
    const std::string member = what + "[" + name + "]";
    if (name.size() < 5 || name.substr(name.size() - 4) != ".npy") {
      return invalid(member + ": .npz member is not a .npy file");
    }
    // Deflate expands at most ~1032:1, so a declared size beyond that ratio is a lie (or a
    // zip bomb): refuse it before allocating.
    if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) || st.size > kMaxTensorBytes + (1u << 20) ||
        st.size > st.comp_size * 1032 + 1024 || st.comp_size > bytes.size()) {
      return invalid(member + ": .npz member size is missing, inconsistent or too large");
    }
    zip_file_t* f = zip_fopen_index(z.get(), static_cast<zip_uint64_t>(i), 0);
    if (!f) return invalid(member + ": cannot open .npz member: " + zip_strerror(z.get()));
    std::string buf(static_cast<size_t>(st.size), '\0');
    const zip_int64_t got = zip_fread(f, buf.data(), st.size);
    zip_fclose(f);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size) {
      return invalid(member + ": .npz member is truncated or corrupt");
    }
    RKD_ASSIGN(Tensor t, parse_npy(std::span(reinterpret_cast<const uint8_t*>(buf.data()), buf.size()), member));
    name.resize(name.size() - 4);
    if (out.count(name)) return invalid(member + ": duplicate .npz member");
    out.emplace(name, std::move(t));
  }
  return out;
}

Result<TensorMap> read_npz(const std::string& path) {
  RKD_ASSIGN(std::string bytes, read_file_bytes(path));
  return parse_npz(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path);
}

Status write_npz(const std::string& path, const TensorMap& tensors, bool compress) {
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error(path + ": cannot create a temporary file beside it: " + errno_text());
  ::close(fd);
  int zerr = 0;
  zip_t* z = zip_open(tmpl.c_str(), ZIP_TRUNCATE, &zerr);
  if (!z) {
    ::unlink(tmpl.c_str());
    return io_error(path + ": cannot create zip archive (libzip error " + std::to_string(zerr) + ")");
  }
  std::vector<std::string> keep;  // buffers must outlive zip_close
  keep.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    auto s = serialize_npy(t);
    if (!s.ok()) {
      zip_discard(z);
      ::unlink(tmpl.c_str());
      return s.error().with_context(path + "[" + name + "]");
    }
    keep.push_back(std::move(s).value());
    zip_source_t* src = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    const zip_int64_t idx = src ? zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      std::string msg = zip_strerror(z);
      zip_discard(z);
      ::unlink(tmpl.c_str());
      return io_error(path + "[" + name + "]: " + msg);
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    std::string msg = zip_strerror(z);
    zip_discard(z);
    ::unlink(tmpl.c_str());
    return io_error(path + ": " + msg);
  }
  ::chmod(tmpl.c_str(), 0644);
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string e = errno_text();
    ::unlink(tmpl.c_str());
    return io_error(path + ": rename failed: " + e);
  }
  return {};
}

}  // namespace rkd
