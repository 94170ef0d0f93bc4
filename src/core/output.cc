#include "core/output.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "core/npy.h"

namespace rkd {

namespace fs = std::filesystem;

namespace {

// Temporaries of every live transaction, for the signal thread.
std::mutex g_output_mu;
std::set<std::string>& live_temps() {
  static std::set<std::string> s;
  return s;
}
void track(const std::string& p) {
  std::lock_guard<std::mutex> lk(g_output_mu);
  live_temps().insert(p);
}
void untrack(const std::string& p) {
  std::lock_guard<std::mutex> lk(g_output_mu);
  live_temps().erase(p);
}

mode_t process_umask() {
  static const mode_t m = [] {
    const mode_t old = ::umask(0);
    ::umask(old);
    return old;
  }();
  return m;
}

std::string err() { return std::strerror(errno); }

fs::path absolute_normal(const std::string& p) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) a = fs::absolute(p, ec).lexically_normal();
  return a;
}

// "DIR/.NAME<suffix>": hidden, beside the destination. (Appended piecewise: GCC 12's
// -Wrestrict misfires on "." + std::string.)
std::string hidden_sibling(const fs::path& dest, const char* suffix) {
  std::string name(1, '.');
  name.append(dest.filename().string()).append(suffix);
  return (dest.parent_path() / name).string();
}
std::string temp_template(const fs::path& dest) { return hidden_sibling(dest, ".rkdeploy-XXXXXX"); }

// The destination's folder exists (nothing creates parent folders).
Status parent_is_folder(const std::string& shown, const fs::path& abs) {
  std::error_code ec;
  const fs::path parent = abs.parent_path();
  if (fs::is_directory(parent, ec)) return {};
  return io_error(shown + ": the folder " + parent.string() + (fs::exists(parent, ec) ? " is not a folder" : " does not exist"));
}

// An empty hidden folder beside `abs`, registered for the signal thread.
Result<std::string> temp_folder(const std::string& shown, const fs::path& abs) {
  std::string t = temp_template(abs);
  if (!::mkdtemp(t.data())) return io_error(shown + ": cannot create a folder in " + abs.parent_path().string() + ": " + err());
  ::chmod(t.c_str(), 0777 & ~process_umask());
  track(t);
  return t;
}

// With force: every entry of the non-empty folder `abs` must be a regular file `owned` lists or
// a folder on the way to one. Returns those files (relative, '/'-separated), the only paths
// publish() removes.
Result<std::vector<std::string>> replaceable_files(const std::string& shown, const fs::path& abs, const OwnedFiles& owned) {
  const std::string refuse = shown + ": --force replaces only a folder that this command wrote before";
  std::string named = shown;
  while (named.size() > 1 && named.back() == '/') named.pop_back();
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(named, ec))) {
    return invalid(refuse + ", never one named through a symbolic link; name the folder itself or another output");
  }
  if (!owned) return invalid(refuse + "; remove its contents or name another output folder");
  auto listed = owned(abs.string());
  if (!listed) return Error{listed.error().kind, refuse + ": " + listed.error().message};
  std::set<std::string> files, dirs;
  for (const auto& f : *listed) {
    const fs::path p = fs::path(f).lexically_normal();
    if (p.empty() || p.is_absolute() || *p.begin() == "..") continue;  // never outside the folder
    files.insert(p.generic_string());
    for (fs::path d = p.parent_path(); !d.empty(); d = d.parent_path()) dirs.insert(d.generic_string());
  }
  std::vector<std::string> found, foreign;
  fs::recursive_directory_iterator it(abs, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(abs).generic_string();
    const auto st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(st)) {
      if (!dirs.count(rel)) {
        foreign.push_back(rel + "/");
        it.disable_recursion_pending();
      }
    } else if (fs::is_regular_file(st) && files.count(rel)) {
      found.push_back(rel);
    } else {
      foreign.push_back(rel);
    }
  }
  if (ec) return io_error(shown + ": cannot list the folder: " + ec.message());
  if (!foreign.empty()) {
    std::string some;
    for (size_t i = 0; i < foreign.size() && i < 3; ++i) some += (i ? ", " : "") + foreign[i];
    if (foreign.size() > 3) some += ", ...";
    return invalid(refuse + ", and it holds " + std::to_string(foreign.size()) + " entr" + (foreign.size() == 1 ? "y" : "ies") +
                   " the previous output does not list (" + some + "); move them away or name another output folder");
  }
  return found;
}

// Removes the listed files of a replaced output now at `old`, then the folders that held them
// once empty. Something else found there (it appeared after the check) is kept, and named.
Status remove_replaced(const std::string& shown, const fs::path& old, const std::vector<std::string>& files) {
  std::error_code ec;
  std::set<fs::path> dirs;
  for (const auto& f : files) {
    fs::remove(old / f, ec);
    for (fs::path d = fs::path(f).parent_path(); !d.empty(); d = d.parent_path()) dirs.insert(d);
  }
  // Deepest first.
  std::vector<fs::path> order(dirs.begin(), dirs.end());
  std::sort(order.begin(), order.end(),
            [](const fs::path& a, const fs::path& b) { return std::distance(a.begin(), a.end()) > std::distance(b.begin(), b.end()); });
  for (const auto& d : order) fs::remove(old / d, ec);
  if (!fs::remove(old, ec) || ec) {
    return io_error(shown + ": the new output is in place; the previous one held files it did not list when replaced, kept in " + old.string());
  }
  return {};
}

}  // namespace

struct OutputTransaction::Item {
  enum Kind { kFile, kFolder, kFilesIn } kind;
  std::string shown;                       // as the user wrote it
  fs::path dest;                           // absolute, symbolic links resolved
  std::string temp;                        // empty: nothing to move (a files_in folder that exists)
  bool nested = false;                     // a file inside an absent files_in folder: moved with it
  std::vector<std::string> replaced = {};  // a folder destination's previous files (force)
};

OutputTransaction::OutputTransaction(std::vector<std::string> inputs, bool force) : force_(force) {
  for (const auto& in : inputs) {
    if (!in.empty()) inputs_.push_back(absolute_normal(in).string());
  }
}

OutputTransaction::~OutputTransaction() {
  if (published_) return;
  // Nested files go with their folder; remove folders last.
  for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
    if (it->temp.empty() || it->nested) continue;
    std::error_code ec;
    fs::remove_all(it->temp, ec);
    untrack(it->temp);
  }
}

Status OutputTransaction::check_free(const std::string& abs, const std::string& shown) const {
  for (const auto& in : inputs_) {
    if (in == abs) return invalid(shown + ": is also an input of this command; choose another output");
  }
  for (const auto& it : items_) {
    if (it.dest.string() == abs) return invalid(shown + ": named twice as an output");
  }
  return {};
}

Result<std::string> OutputTransaction::file(const std::string& path) {
  if (path.empty()) return invalid("an output path is empty");
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec)) && !fs::exists(path, ec)) {
    return invalid(path + ": a symbolic link to nothing; remove it or name another output");
  }
  const fs::path abs = absolute_normal(path);
  const auto st = fs::status(abs, ec);
  if (fs::is_directory(st)) return invalid(path + ": is a folder, not a file");
  if (fs::exists(st) && !fs::is_regular_file(st)) return invalid(path + ": exists and is not a regular file");
  RKD_TRY(check_free(abs.string(), path));
  Item item{Item::kFile, path, abs, "", false};
  for (const auto& f : items_) {
    if (f.kind == Item::kFilesIn && !f.temp.empty() && f.dest == abs.parent_path()) {
      // The folder does not exist yet: the file goes into its temporary.
      item.temp = (fs::path(f.temp) / abs.filename()).string();
      const int fd = ::open(item.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0) return io_error(path + ": cannot create " + item.temp + ": " + err());
      ::close(fd);
      item.nested = true;
      items_.push_back(std::move(item));
      return items_.back().temp;
    }
  }
  RKD_TRY(parent_is_folder(path, abs));
  const fs::path parent = abs.parent_path();
  std::string t = temp_template(abs);
  const int fd = ::mkstemp(t.data());
  if (fd < 0) return io_error(path + ": cannot create a file in " + parent.string() + ": " + err());
  ::fchmod(fd, 0666 & ~process_umask());
  ::close(fd);
  item.temp = t;
  track(t);
  items_.push_back(std::move(item));
  return items_.back().temp;
}

Result<std::string> OutputTransaction::folder(const std::string& path, const OwnedFiles& owned) {
  if (path.empty()) return invalid("an output folder is empty");
  std::error_code ec;
  const fs::path abs = absolute_normal(path);
  const fs::path cwd = absolute_normal(".");
  if (abs == abs.root_path() || path_is_within(cwd, abs)) {
    return invalid(path + ": is the working folder or one of its parents; name a new folder for the output");
  }
  for (const auto& in : inputs_) {
    if (path_is_within(fs::path(in), abs)) return invalid(path + ": holds an input of this command (" + in + "); choose another output folder");
  }
  RKD_TRY(check_free(abs.string(), path));
  const auto st = fs::status(abs, ec);
  if (fs::exists(st) && !fs::is_directory(st)) return invalid(path + ": exists and is not a folder");
  std::vector<std::string> replaced;
  if (fs::is_directory(st) && !fs::is_empty(abs, ec)) {
    if (!force_) return invalid(path + ": the folder is not empty; remove it, name another, or pass --force to replace a previous output");
    RKD_ASSIGN(replaced, replaceable_files(path, abs, owned));
  }
  RKD_TRY(parent_is_folder(path, abs));
  RKD_ASSIGN(std::string t, temp_folder(path, abs));
  items_.push_back(Item{Item::kFolder, path, abs, t, false, std::move(replaced)});
  return items_.back().temp;
}

Status OutputTransaction::files_in(const std::string& path) {
  if (path.empty()) return invalid("an output folder is empty");
  std::error_code ec;
  const fs::path abs = absolute_normal(path);
  const auto st = fs::status(abs, ec);
  if (fs::is_directory(st)) {
    items_.push_back(Item{Item::kFilesIn, path, abs, "", false});
    return {};
  }
  if (fs::exists(st)) return invalid(path + ": exists and is not a folder");
  RKD_TRY(check_free(abs.string(), path));
  RKD_TRY(parent_is_folder(path, abs));
  RKD_ASSIGN(std::string t, temp_folder(path, abs));
  items_.push_back(Item{Item::kFilesIn, path, abs, t, false});
  return {};
}

Status OutputTransaction::publish() {
  if (published_) return {};
  std::error_code ec;
  for (auto& it : items_) {
    if (it.temp.empty() || it.nested) continue;
    if (it.kind == Item::kFolder && fs::exists(it.dest, ec)) {
      // Checked empty (or, with force, holding only the previous output's files) when
      // declared. Swap the two folders in one step (renameat2 RENAME_EXCHANGE), so that at no
      // moment is DIR absent; the temporary's path then holds the previous folder, of which
      // only the listed files are removed. The signal thread must not remove it whole.
      untrack(it.temp);
      const int exchanged = ::renameat2(AT_FDCWD, it.temp.c_str(), AT_FDCWD, it.dest.c_str(), RENAME_EXCHANGE);
      const int exchange_errno = errno;
      if (exchanged == 0) {
        const std::string old = it.temp;
        it.temp.clear();
        RKD_TRY(remove_replaced(it.shown, old, it.replaced));
        continue;
      }
      if (exchange_errno != EINVAL && exchange_errno != ENOSYS) {
        track(it.temp);
        return io_error(it.shown + ": cannot replace the previous folder: " + std::strerror(exchange_errno));
      }
      // A file system without the exchange: move the previous folder aside, then rename.
      track(it.temp);
      std::string old = hidden_sibling(it.dest, ".rkdeploy-old-XXXXXX");
      if (!::mkdtemp(old.data())) return io_error(it.shown + ": cannot make room for the previous folder: " + err());
      if (::rename(it.dest.c_str(), old.c_str()) != 0) {
        const std::string e = err();
        ::rmdir(old.c_str());
        return io_error(it.shown + ": cannot move the previous folder aside: " + e);
      }
      if (::rename(it.temp.c_str(), it.dest.c_str()) != 0) {
        const std::string e = err();
        ::rename(old.c_str(), it.dest.c_str());
        return io_error(it.shown + ": " + e);
      }
      untrack(it.temp);
      it.temp.clear();
      RKD_TRY(remove_replaced(it.shown, old, it.replaced));
      continue;
    }
    if (::rename(it.temp.c_str(), it.dest.c_str()) != 0) {
      return io_error(it.shown + ": " + err());
    }
    untrack(it.temp);
    it.temp.clear();
  }
  published_ = true;
  return {};
}

Status install_signal_cleanup() {
  sigset_t set;
  sigemptyset(&set);
  bool any = false;
  for (int s : {SIGINT, SIGTERM, SIGHUP}) {
    // A signal the parent had ignored stays ignored (nohup, a shell's background job).
    struct sigaction old {};
    if (sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaddset(&set, s);
    any = true;
  }
  if (!any || pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return {};
  std::thread watcher;
  try {
    watcher = std::thread([set] {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) return;
      {
        std::lock_guard<std::mutex> lk(g_output_mu);
        for (const auto& p : live_temps()) {
          std::error_code ec;
          fs::remove_all(p, ec);
        }
        live_temps().clear();
      }
      // End the process by the same signal, as if nothing had caught it.
      std::signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      ::raise(sig);
      ::_exit(128 + sig);
    });
  } catch (const std::system_error& e) {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    return io_error(std::string("cannot start the thread that cleans up after a signal: ") + e.what());
  }
  watcher.detach();
  return {};
}

}  // namespace rkd
