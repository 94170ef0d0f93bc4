#!/usr/bin/env python3
"""Runs the commands the documentation shows and compares what they print with what it shows.

Every fenced block whose info string is `console` is a transcript: a line starting with `$ `
is a command (a line ending in a backslash continues it), the lines after it up to the next
command are what it prints (standard output and standard error together). The commands of one
file run in order in one bash process (variables and the working folder carry over), in a
scratch folder where `build`, `scripts`, `tests`, `fuzz`, `targets` and `docs` lead to the
source tree and the build, with the build's `rkdeploy` first on PATH.

What a block shows must appear in what the command printed, line by line, in order (lines the
block leaves out are skipped, so a block may show only the stable part of an output); `...`
within a shown line stands for any text (timings, paths), and trailing spaces are ignored.
A command that exits with a non-zero status fails the test unless the block shows its
`rkdeploy: ` error line. A block whose info string is `python` is a script: it runs, in its
place among the commands, with the build's Python package on PYTHONPATH, and must exit with
status 0. Blocks with another info string (`sh` for set-up commands and commands that need a
board) are not run.

Usage: doc_test.py BUILD_DIR FILE.md... [--keep]   exit status 1 names every mismatch.
"""
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\S*)\s*$")


def transcripts(path):
    """[(line number, command, [shown output lines])] of the file's console blocks."""
    out, block, cmd, script = [], None, None, None
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            if block == "python":
                out.append((script[0], "/usr/bin/python3 - <<'RKD_DOC_PYTHON'\n" + "\n".join(script[1]) + "\nRKD_DOC_PYTHON", []))
            block = None if block is not None else m.group(1)
            cmd = None
            script = (i + 2, []) if block == "python" else None
            i += 1
            continue
        if block == "python":
            script[1].append(line)
        if block == "console":
            if line.startswith("$ "):
                text, start = line[2:], i + 1
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text += "\n" + lines[i]  # bash reads backslash-newline as a continuation
                cmd = (start, text, [])
                out.append(cmd)
            elif cmd is not None and line.strip():
                cmd[2].append(line.rstrip())
        i += 1
    return out


def line_pattern(shown):
    parts = [re.escape(p) for p in shown.split("...")]
    return re.compile("^" + ".*".join(parts) + r"\s*$")


def matches(shown, printed):
    """None when every shown line appears in order in the printed ones, else the first that does not."""
    at = 0
    for s in shown:
        pat = line_pattern(s)
        while at < len(printed) and not pat.match(printed[at]):
            at += 1
        if at == len(printed):
            return s
        at += 1
    return None


def main():
    args = [a for a in sys.argv[1:] if a != "--keep"]
    keep = "--keep" in sys.argv
    build, files = os.path.abspath(args[0]), args[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failures, commands = [], 0
    for md in files:
        cmds = transcripts(md)
        if not cmds:
            continue
        work = tempfile.mkdtemp(prefix="rkd_doc_")
        for name in ("scripts", "tests", "fuzz", "targets", "docs", "examples"):
            os.symlink(os.path.join(root, name), os.path.join(work, name))
        os.symlink(build, os.path.join(work, "build"))
        # One bash process per file: each command's output to its own file, then its status.
        script = ["cd " + work]
        for k, (_, text, _) in enumerate(cmds):
            script.append("{\n%s\n} > .out%d 2>&1; echo $? > .rc%d" % (text, k, k))
        env = dict(os.environ, PATH=os.path.join(build, "src", "cli") + os.pathsep + os.environ["PATH"],
                   PYTHONPATH=os.pathsep.join(p for p in (os.path.join(build, "python"), os.environ.get("PYTHONPATH")) if p))
        subprocess.run(["bash", "-c", "\n".join(script)], env=env, cwd=work, stdin=subprocess.DEVNULL)
        for k, (lineno, text, shown) in enumerate(cmds):
            commands += 1
            try:
                printed = [l.rstrip() for l in open(os.path.join(work, ".out%d" % k), encoding="utf-8", errors="replace").read().split("\n")]
            except FileNotFoundError:
                failures.append("%s:%d: `%s` did not run" % (md, lineno, text))
                continue
            rc = open(os.path.join(work, ".rc%d" % k)).read().strip()
            missing = matches(shown, printed)
            if rc != "0" and not any(s.startswith("rkdeploy: ") for s in shown):
                failures.append("%s:%d: `%s` exited %s (a block shows a failure by showing its rkdeploy: line):\n    %s" %
                                (md, lineno, text, rc, "\n    ".join(printed[-15:])))
            elif missing is not None:
                failures.append("%s:%d: `%s`\n  shows: %s\n  which is not in what it printed (in order):\n    %s" %
                                (md, lineno, text, missing, "\n    ".join(printed[:40])))
        if keep:
            print("kept", work, "for", md)
        else:
            subprocess.run(["rm", "-rf", work])
    for f in failures:
        print("FAIL:", f)
    print("doc-test: %d passed, %d failed" % (commands - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
