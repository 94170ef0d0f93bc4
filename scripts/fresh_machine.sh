#!/usr/bin/env bash
# Runs a command as root on a machine that never saw this project: a pristine Debian 12
# (bookworm) root made by mmdebstrap (variant minbase: the essential packages and apt, nothing
# else) from the host's apt sources, holding a clean clone of this repository's HEAD.
#
#   scripts/fresh_machine.sh [OPTIONS] CMD...     run `CMD...` (one shell command line) there
#   scripts/fresh_machine.sh [OPTIONS] --readme test|demo
#                                               run the README's test or demo command, as written
# Options:
#   --keep        keep the root afterwards (its path is printed) instead of deleting it
#   --no-cache    do not share the host's download caches (below)
#
# What the command sees: the clone at /root/rkdeploy (its working directory), HOME=/root, a
# clean environment (PATH, LANG, TERM, CI, JOBS and RKD_* pass through), /proc, /sys (read-only),
# /dev, /dev/pts, a fresh /dev/shm, the host's name resolution and its local certificate
# authorities (/usr/local/share/ca-certificates). Uncommitted changes are not in the clone:
# commit first.
#
# Download caches: unless --no-cache, the host's apt archive folder and a host npm cache
# (/var/cache/rkdeploy-fresh/npm) are mounted at the root's /var/cache/apt/archives and
# /root/.npm, so that repeated runs do not fetch the same files again. They hold downloaded
# package files only (apt and npm check them); what is installed in the root starts from nothing
# either way.
#
# Teardown: the command runs in its own mount and PID namespaces (unshare --mount --pid), so
# every mount made for it disappears with its last process, and that process ends with the
# command (the kernel kills the namespace's processes when its first one exits; on an interrupt
# the script stops unshare, whose --kill-child then kills that first process). The root is
# deleted after that, on success, failure or interrupt, and only after checking that nothing is
# mounted below it in the host's namespace. Exit status: the command's; 3 when the root cannot be
# made or the arguments are wrong.
set -euo pipefail

top="$(cd "$(dirname "$0")/.." && pwd)"
keep=0 cache=1 readme=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --no-cache) cache=0; shift ;;
    --readme) [ $# -ge 2 ] || { echo "fresh_machine.sh: --readme needs test or demo" >&2; exit 3; }; readme="$2"; shift 2 ;;
    --) shift; break ;;
    -*) echo "fresh_machine.sh: unknown option '$1'" >&2; exit 3 ;;
    *) break ;;
  esac
done
say() { printf 'fresh_machine: %s\n' "$*" >&2; }
die() { say "$*"; exit 3; }

if [ -n "$readme" ]; then
  # The README's set-up commands are the first lines of its first ```sh block; pick the one that
  # runs `make $readme` and drop its comment.
  cmd="$(awk -v want="make $readme" '
    /^```sh/ && !seen { inblock = 1; seen = 1; next }
    inblock && /^```/ { exit }
    inblock && index($0, want) { sub(/[ \t]+#.*$/, ""); print; exit }' "$top/README.md")"
  [ -n "$cmd" ] || die "README.md has no '$readme' command in its first sh block"
elif [ $# -gt 0 ]; then
  cmd="$*"
else
  die "usage: fresh_machine.sh [--keep] [--no-cache] CMD... | --readme test|demo"
fi

[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap, chroot and mounts)"
for tool in mmdebstrap unshare chroot git; do
  if ! command -v "$tool" > /dev/null; then
    [ "$tool" = mmdebstrap ] || die "'$tool' is missing"
    say "installing mmdebstrap on the host"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap > /dev/null ||
      { apt-get update -q > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap > /dev/null; } ||
      die "could not install mmdebstrap"
  fi
done

head="$(git -C "$top" rev-parse HEAD)" || die "$top is not a git checkout"
if [ -n "$(git -C "$top" status --porcelain --untracked-files=no)" ]; then
  say "warning: uncommitted changes in $top are not part of the fresh root (HEAD $head is)"
fi

# The host's apt sources, each file as one mmdebstrap mirror argument.
sources=()
[ -s /etc/apt/sources.list ] && grep -q '^[[:space:]]*deb' /etc/apt/sources.list && sources+=(/etc/apt/sources.list)
for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sources+=("$f")
done
[ "${#sources[@]}" -gt 0 ] || die "the host has no apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d)"

work="$(mktemp -d "${TMPDIR:-/var/tmp}/rkdeploy-fresh.XXXXXX")"
root="$work/root"
child=""
teardown() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$child" ] && kill -0 "$child" 2> /dev/null; then
    kill -TERM "$child" 2> /dev/null || true
    wait "$child" 2> /dev/null || true
  fi
  if grep -qF " $work/" /proc/self/mountinfo; then
    say "something is still mounted below $work; not deleting it"
    return
  fi
  if [ "$keep" = 1 ]; then
    say "kept the root: $root"
  else
    rm -rf --one-file-system "$work"
  fi
  exit "$rc"
}
trap teardown EXIT
trap 'say "interrupted"; exit 130' INT TERM

t0=$SECONDS
say "building a Debian 12 minbase root in $root (sources: ${sources[*]})"
if ! mmdebstrap --quiet --variant=minbase --mode=root --format=directory bookworm "$root" "${sources[@]}" < /dev/null > "$work/mmdebstrap.log" 2>&1; then
  cat "$work/mmdebstrap.log" >&2
  die "mmdebstrap failed"
fi
say "root ready in $((SECONDS - t0)) s"

git clone --quiet --no-hardlinks "$top" "$root/root/rkdeploy"
git -C "$root/root/rkdeploy" checkout --quiet --detach "$head"
# The host's network set-up, as any machine on this network has it: name resolution, and the
# site's own certificate authorities (a TLS-inspecting proxy's, say), which the ca-certificates
# package adds to the root's trust store when setup.sh installs it.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
[ -f /etc/hosts ] && cp -L /etc/hosts "$root/etc/hosts"
if compgen -G "/usr/local/share/ca-certificates/*" > /dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -rL /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
mkdir -p "$root/root/.npm"
if [ "$cache" = 1 ]; then
  mkdir -p /var/cache/apt/archives/partial /var/cache/rkdeploy-fresh/npm
fi

# Environment of the command: nothing of the host's but these.
envs=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "TERM=${TERM:-dumb}")
for v in CI JOBS $(compgen -e | grep '^RKD_' || true); do
  [ -n "${!v+x}" ] && envs+=("$v=${!v}")
done

say "running as root in the fresh root ($((SECONDS - t0)) s so far): $cmd"
# Inside the new namespaces: mount, chroot, run. Arguments: root, cache flag, command, env...
unshare --mount --propagation private --pid --fork --kill-child bash -c '
  set -e
  root="$1" cache="$2" cmd="$3"; shift 3
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"; mount -o remount,bind,ro "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
  if [ "$cache" = 1 ]; then
    mount --bind /var/cache/apt/archives "$root/var/cache/apt/archives"
    mount --bind /var/cache/rkdeploy-fresh/npm "$root/root/.npm"
  fi
  chmod 1777 "$root/tmp"
  exec chroot "$root" /usr/bin/env -i "$@" /bin/bash -c "cd /root/rkdeploy && $cmd"
' fresh "$root" "$cache" "$cmd" "${envs[@]}" < /dev/null &
child=$!
set +e
wait "$child"; rc=$?
while kill -0 "$child" 2> /dev/null; do wait "$child"; rc=$?; done
set -e
child=""
# Nothing is printed after a command that succeeded: its last lines (CTest's counts) stay last.
[ "$rc" = 0 ] || say "command exited $rc after $((SECONDS - t0)) s in all"
exit "$rc"
