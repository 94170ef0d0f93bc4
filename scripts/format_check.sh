#!/usr/bin/env bash
# The C/C++ sources against .clang-format (clang-format 14, Debian 12's):
#   scripts/format_check.sh            every tracked .cc/.h/.c/.cpp (the tree is formatted, so a
#                                      clean clone - CI - checks the files any change touched)
#   FORMAT_BASE=REV scripts/format_check.sh
#                                      only the files changed since REV (e.g. origin/main)
#   scripts/format_check.sh --fix      rewrites the same files in place
# Exit status 1 names every file that differs, with clang-format's first complaints.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = --fix ] && fix=1
cf=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$cf" ] || { echo "format-check: clang-format missing (scripts/setup.sh --format installs it)" >&2; exit 2; }
if [ -n "${FORMAT_BASE:-}" ]; then
  mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$FORMAT_BASE" -- '*.cc' '*.h' '*.c' '*.cpp')
elif git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c' '*.cpp')
else  # a copy without .git: the source folders
  mapfile -t files < <(find src tests bench fuzz tools -type f \( -name '*.cc' -o -name '*.h' -o -name '*.c' -o -name '*.cpp' \) 2> /dev/null | sort)
fi
# Shell scripts: no pipeline into `grep -q` (or `head`). Under pipefail the writer dies of
# SIGPIPE (status 141) when the reader stops early, and the pipeline fails or passes by timing;
# capture the output, then match it.
if piped=$(grep -rnE '\|[[:space:]]*(grep[[:space:]]+(-[A-Za-z]*q|--quiet)|head([[:space:]]|$))' --include='*.sh' scripts tests .ci 2> /dev/null); then
  echo "format-check: a pipeline into grep -q or head (capture the output first, then match it):"
  echo "$piped"
  exit 1
fi
if [ "${#files[@]}" -eq 0 ]; then
  echo "format-check: no C/C++ file to check"
  exit 0
fi
if [ "$fix" = 1 ]; then
  "$cf" -i --style=file "${files[@]}"
  echo "format-check: formatted ${#files[@]} file(s)"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! out=$("$cf" --style=file --dry-run -Werror "$f" 2>&1); then
    echo "$f: not formatted (scripts/format_check.sh --fix rewrites it):"
    head -6 <<< "$out"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "format-check: $bad of ${#files[@]} file(s) differ from .clang-format"
  exit 1
fi
echo "format-check: ${#files[@]} file(s) formatted"
