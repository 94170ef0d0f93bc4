// The output discipline of every command that writes files (docs/cli.md, "Outputs").
//
// Contract:
//  - Destinations are declared before the work: each declaration checks the destination at
//    once and creates its temporary sibling (a hidden `.NAME.rkdeploy-XXXXXX` in the same
//    folder, so the final rename never crosses a file system). The command writes into the
//    temporary paths it is given.
//  - publish() moves every temporary into place, after all of them are complete; a
//    transaction destroyed without publish() (an error, an exception) removes them, and so
//    does SIGINT/SIGTERM/SIGHUP once install_signal_cleanup() ran (the process then ends by
//    the signal, exit status 128 + N).
//  - Nothing the command did not create is deleted or replaced, except:
//      * a regular file named as a file destination (the user named it, as with cc -o), and
//      * with `force`, the files a previous run of the same command wrote into a folder
//        destination, as that run listed them (`OwnedFiles`: compile reads its manifest). A
//        folder that holds anything else (a file the list does not name, a symbolic link, a
//        device), that has no such list, or that is named through a symbolic link is refused
//        whatever the flags; on publish only the listed files (and the folders that held
//        them, once empty) are removed.
//    Refused always: a destination that is also an input (or a folder holding one), a file
//    destination that is a folder or not a regular file, a folder destination that is a
//    file, the working directory or one of its ancestors, the same destination twice.
//  - A missing parent folder is an I/O error (exit 1); nothing creates parent folders.
//  - A symbolic link as a file destination: its target is replaced (the link stays).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"

namespace rkd {

// The files (paths relative to `folder`, '/'-separated) that a previous run of the command
// wrote into the folder destination `folder`, or an error saying why the folder is not such
// an output. Only paths that also exist in the folder are ever removed.
using OwnedFiles = std::function<Result<std::vector<std::string>>(const std::string& folder)>;

class OutputTransaction {
 public:
  // `inputs`: every path the command reads (files or folders), protected from the outputs.
  explicit OutputTransaction(std::vector<std::string> inputs = {}, bool force = false);
  ~OutputTransaction();
  OutputTransaction(const OutputTransaction&) = delete;
  OutputTransaction& operator=(const OutputTransaction&) = delete;

  // One file. Returns the temporary path to write (an empty file already exists there).
  // A file inside a folder declared with files_in() goes into that folder's temporary.
  Result<std::string> file(const std::string& path);
  // A folder the command fills as a whole (compile -o): absent, empty, or with force a
  // previous output whose files `owned` lists (without `owned`, force replaces nothing).
  // Returns the (empty) temporary folder to fill.
  Result<std::string> folder(const std::string& path, const OwnedFiles& owned = {});
  // A folder that receives files declared afterwards with file(): an existing folder keeps
  // its other contents; an absent one is created (as a temporary, renamed on publish).
  Status files_in(const std::string& path);

  // Moves every temporary into place. After a failure part way (the file system refusing a
  // rename that the checks allowed), the outputs already moved stay and the error names the
  // first one that did not.
  Status publish();

 private:
  struct Item;
  std::vector<Item> items_;
  std::vector<std::string> inputs_;  // absolute, lexically normal
  bool force_;
  bool published_ = false;
  Status check_free(const std::string& abs, const std::string& shown) const;
};

// Blocks SIGINT, SIGTERM and SIGHUP (those not inherited as ignored, as under nohup) in the
// calling thread (call it first in main, before any
// thread exists, so every later thread inherits the mask) and starts a thread that, on one
// of them, removes the temporaries of every live OutputTransaction and ends the process by
// that signal. Fails (an io Error) when the thread cannot be started (no memory or threads
// left); the signals are then left as they were.
Status install_signal_cleanup();

}  // namespace rkd
