#!/usr/bin/env bash
# CLI contract: good runs write their output; bad input gives a clear error naming the
# file/tensor/dimension, a non-zero exit, and no output file. Usage: test_cli.sh RKDEPLOY
set -u
bin="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
pass=0
py=/usr/bin/python3

ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error NAME EXPECTED_SUBSTRING -- command...
expect_error() {
  local name="$1" want="$2"
  shift 3
  rm -f "$dir/out.npy"
  "$@" >"$dir/stdout" 2>"$dir/stderr"
  local rc=$?
  if [ "$rc" -eq 0 ]; then bad "$name: exit 0"; return; fi
  if ! grep -qF -- "$want" "$dir/stderr"; then bad "$name: stderr lacks '$want': $(cat "$dir/stderr")"; return; fi
  if [ -e "$dir/out.npy" ]; then bad "$name: output file written"; return; fi
  ls "$dir" | grep -q '\.tmp\.' && { bad "$name: temporary file left"; return; }
  ok
}

# Inputs, written with rkdeploy's own fixtures (no Python needed): use the golden npy dir.
data="$(dirname "$0")/../data/npy"
cp "$data/f32_v1.npy" "$dir/x3.npy"   # [2, 3, 4]
"$bin" help >/dev/null && ok || bad "help"
"$bin" help sample grid | grep -q -- "--align-corners" && ok || bad "help sample grid"
expect_error "help unknown" "no subcommand 'nope'" -- "$bin" help nope

# Build valid inputs with the demo-free path: a tiny generator in the binary is not
# available, so craft .npy headers by hand (format 1.0, float32).
mknpy() {  # mknpy FILE "shape tuple" count value
  local f="$1" shape="$2" n="$3" v="$4"
  local dict="{'descr': '<f4', 'fortran_order': False, 'shape': ($shape), }"
  local total=$((10 + ${#dict} + 1))
  local pad=$(( (64 - total % 64) % 64 ))
  local hl=$(( ${#dict} + pad + 1 ))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hl & 255)))\\x$(printf %02x $((hl >> 8)))"
    printf '%s' "$dict"
    printf '%*s' "$pad" ''
    printf '\n'
    for ((i = 0; i < n; i++)); do printf "$v"; done
  } >"$f"
}
mknpy "$dir/x.npy" "1, 2, 3, 4" 24 '\x00\x00\x80\x3f'       # ones
mknpy "$dir/g.npy" "1, 2, 2, 2" 8 '\x00\x00\x00\x00'        # centre
mknpy "$dir/g_bad.npy" "1, 2, 2, 3" 12 '\x00\x00\x00\x00'
mknpy "$dir/g_batch.npy" "2, 2, 2, 2" 16 '\x00\x00\x00\x00'

"$bin" sample grid --input "$dir/x.npy" --grid "$dir/g.npy" -o "$dir/y.npy" >/dev/null && [ -s "$dir/y.npy" ] && ok || bad "grid good run"
expect_error "grid last dim" "grid: dimension 3 must be 2" -- "$bin" sample grid --input "$dir/x.npy" --grid "$dir/g_bad.npy" -o "$dir/out.npy"
expect_error "grid batch" "grid: dimension 0 (batch)" -- "$bin" sample grid --input "$dir/x.npy" --grid "$dir/g_batch.npy" -o "$dir/out.npy"
expect_error "grid missing file" "does_not_exist.npy" -- "$bin" sample grid --input "$dir/does_not_exist.npy" --grid "$dir/g.npy" -o "$dir/out.npy"
expect_error "grid bad mode" "mode: 'trilinear'" -- "$bin" sample grid --input "$dir/x.npy" --grid "$dir/g.npy" --mode trilinear -o "$dir/out.npy"
expect_error "grid rank" "input: rank must be 4" -- "$bin" sample grid --input "$dir/x3.npy" --grid "$dir/g.npy" -o "$dir/out.npy"
printf 'garbage' >"$dir/junk.npy"
expect_error "grid junk file" "junk.npy: not a .npy file" -- "$bin" sample grid --input "$dir/junk.npy" --grid "$dir/g.npy" -o "$dir/out.npy"
# An existing output is left untouched when the run fails.
cp "$dir/y.npy" "$dir/keep.npy"
"$bin" sample grid --input "$dir/x.npy" --grid "$dir/g_bad.npy" -o "$dir/keep.npy" 2>/dev/null
cmp -s "$dir/y.npy" "$dir/keep.npy" && ok || bad "existing output damaged"

# deform-attn: value [1, 5, 1, 2] (levels 2x2 + 1x1), locations [1, 3, 1, 2, 2], weights [1, 3, 1, 2]
mknpy "$dir/v.npy" "1, 5, 1, 2" 10 '\x00\x00\x80\x3f'
mknpy "$dir/l.npy" "1, 3, 1, 2, 2" 12 '\x00\x00\x00\x3f'   # 0.5
mknpy "$dir/w.npy" "1, 3, 1, 2" 6 '\x00\x00\x00\x3f'
mknpy "$dir/w_nan.npy" "1, 3, 1, 2" 6 '\x00\x00\xc0\x7f'
mknpy "$dir/l_pts.npy" "1, 3, 1, 3, 2" 18 '\x00\x00\x00\x3f'
for m in default discrete discrete_fixed; do
  "$bin" sample deform-attn --value "$dir/v.npy" --shapes 2x2,1x1 --points 1,1 --locations "$dir/l.npy" \
    --weights "$dir/w.npy" --method $m -o "$dir/o_$m.npy" >/dev/null && [ -s "$dir/o_$m.npy" ] && ok || bad "deform $m"
done
expect_error "deform nan weights" "weights: non-finite value" -- "$bin" sample deform-attn --value "$dir/v.npy" --shapes 2x2,1x1 --points 1,1 --locations "$dir/l.npy" --weights "$dir/w_nan.npy" -o "$dir/out.npy"
expect_error "deform points sum" "locations: dimension 3 is 3 but the sum of points per level is 2" -- "$bin" sample deform-attn --value "$dir/v.npy" --shapes 2x2,1x1 --points 1,1 --locations "$dir/l_pts.npy" --weights "$dir/w.npy" -o "$dir/out.npy"
expect_error "deform tokens" "value: dimension 1 has 5 tokens but the level shapes sum to 8" -- "$bin" sample deform-attn --value "$dir/v.npy" --shapes 2x2,2x2 --points 1,1 --locations "$dir/l.npy" --weights "$dir/w.npy" -o "$dir/out.npy"
expect_error "deform shapes syntax" "shapes: width: '' is not a positive integer" -- "$bin" sample deform-attn --value "$dir/v.npy" --shapes 2x --points 1,1 --locations "$dir/l.npy" --weights "$dir/w.npy" -o "$dir/out.npy"
expect_error "deform method" "method: 'nearest'" -- "$bin" sample deform-attn --value "$dir/v.npy" --shapes 2x2,1x1 --points 1,1 --locations "$dir/l.npy" --weights "$dir/w.npy" --method nearest -o "$dir/out.npy"

# inspect: a conformance model from libonnx-testdata, text and JSON; bad files.
gs_model=/usr/share/libonnx-testdata/data/node/test_gridsample/model.onnx
if [ -f "$gs_model" ]; then
  "$bin" inspect "$gs_model" | grep -q "GridSample 1" && ok || bad "inspect text"
  "$bin" inspect "$gs_model" --json | grep -q '"GridSample": 1' && ok || bad "inspect json"
else
  bad "libonnx-testdata missing ($gs_model)"
fi
printf 'not a model' >"$dir/junk.onnx"
expect_error "inspect junk" "junk.onnx: not an ONNX model" -- "$bin" inspect "$dir/junk.onnx"
expect_error "inspect missing" "nope.onnx: cannot open" -- "$bin" inspect "$dir/nope.onnx"

echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
