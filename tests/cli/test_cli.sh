#!/usr/bin/env bash
# CLI contract: good runs write their output; bad input gives a clear error naming the
# file/tensor/dimension, a non-zero exit, and no output file.
# Usage: test_cli.sh RKDEPLOY [MODELS_DIR]   (MODELS_DIR: the tiny reference models)
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
  [ -n "$(find "$dir" -maxdepth 1 -name '*.tmp.*')" ] && { bad "$name: temporary file left"; return; }
  ok
}

# Inputs, written with rkdeploy's own fixtures (no Python needed): use the golden npy dir.
data="$(dirname "$0")/../data/npy"
cp "$data/f32_v1.npy" "$dir/x3.npy"   # [2, 3, 4]
"$bin" help >/dev/null && ok || bad "help"
[[ "$("$bin" help sample grid)" == *--align-corners* ]] && ok || bad "help sample grid"
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
  [[ "$("$bin" inspect "$gs_model")" == *"GridSample 1"* ]] && ok || bad "inspect text"
  [[ "$("$bin" inspect "$gs_model" --json)" == *'"GridSample": 1'* ]] && ok || bad "inspect json"
else
  bad "libonnx-testdata missing ($gs_model)"
fi
printf 'not a model' >"$dir/junk.onnx"
expect_error "inspect junk" "junk.onnx: not an ONNX model" -- "$bin" inspect "$dir/junk.onnx"
expect_error "inspect missing" "nope.onnx: cannot open" -- "$bin" inspect "$dir/nope.onnx"

# run: the tiny reference models (ctest fixture models_tiny) on .npy inputs and on a photo.
models="${2:-}"
if [ -n "$models" ] && [ -f "$models/deimv2_s_arch_tiny.onnx" ]; then
  m="$models/deimv2_s_arch_tiny"
  "$bin" run "$m.onnx" --input images="$m.input_images.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy" \
    --output-dir "$dir/run" --profile >"$dir/stdout" 2>"$dir/stderr" && ok || bad "run deim: $(cat "$dir/stderr")"
  for o in labels boxes scores; do [ -f "$dir/run/$o.npy" ] && ok || bad "run deim: $o.npy missing"; done
  grep -q "MSDeformAttn" "$dir/stdout" && ok || bad "run --profile lacks the fused op"
  grep -q "2 site(s) fused" "$dir/stderr" && ok || bad "run: fusion summary missing"
  "$bin" run "$m.onnx" --input images="$m.input_images.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy" \
    --output-dir "$dir/run_nofuse" --no-fuse >/dev/null 2>&1 && ok || bad "run --no-fuse"
  "$py" - "$dir/run" "$dir/run_nofuse" <<'PY' && ok || bad "fused and unfused runs differ"
import sys, numpy as np
a, b = sys.argv[1], sys.argv[2]
for n in ("labels", "scores", "boxes"):
    x, y = np.load(f"{a}/{n}.npy"), np.load(f"{b}/{n}.npy")
    assert x.shape == y.shape, n
    if n == "labels": assert (x == y).all(), n
    else: assert np.abs(x - y).max() <= 1e-4 * max(1.0, np.abs(y).max()), (n, np.abs(x - y).max())
PY
  # orig_target_sizes [0, 0]: refused before running, naming the input.
  "$py" -c "import numpy as np; np.save('$dir/zero_sizes.npy', np.zeros((1, 2), np.int64))"
  expect_error "run zero sizes" "every box would be scaled to zero" -- "$bin" run "$m.onnx" --input images="$m.input_images.npy" --input orig_target_sizes="$dir/zero_sizes.npy" --output-dir "$dir/out.npy"
  expect_error "run unknown input" "input 'imgs': the model has no such input" -- "$bin" run "$m.onnx" --input imgs="$m.input_images.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy"
  expect_error "run missing input" "input 'orig_target_sizes' is missing" -- "$bin" run "$m.onnx" --input images="$m.input_images.npy"
  expect_error "run bad shape" "input 'images': shape [2, 3, 4]" -- "$bin" run "$m.onnx" --input images="$dir/x3.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy"
  expect_error "run dump-after" "no pass named 'nope'" -- "$bin" run "$m.onnx" --input images="$m.input_images.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy" --dump-after nope
  photo=/usr/lib/python3/dist-packages/skimage/data/chelsea.png
  if [ -f "$photo" ]; then
    "$bin" run "$m.onnx" --image "$photo" --draw "$dir/boxes.png" >"$dir/stdout" 2>&1 && ok || bad "run --image deim: $(cat "$dir/stdout")"
    grep -q "deim output" "$dir/stdout" && [ -s "$dir/boxes.png" ] && ok || bad "run --image deim output"
    y="$models/yolov8n_arch_tiny"
    "$bin" run "$y.onnx" --image "$photo" --json >"$dir/det.json" 2>&1 && ok || bad "run --image yolo"
    "$py" -c "import json,sys; d=json.load(open('$dir/det.json')); assert d['output_kind']=='yolo' and 'detections' in d" && ok || bad "run --json"
    expect_error "run image junk" "junk.onnx" -- "$bin" run "$dir/junk.onnx" --image "$photo"
    expect_error "run photo missing" "nope.png" -- "$bin" run "$m.onnx" --image "$dir/nope.png"
  else
    bad "python3-skimage photos missing ($photo)"
  fi
else
  bad "tiny models missing in '$models' (ctest fixture models_tiny)"
fi

# The command line's own exit codes (0 ok, 1 I/O, 2 usage or invalid input) and its prefix: no
# abort and no CLI11 code (104-109), whatever the arguments.
expect_exit() {  # expect_exit NAME CODE SUBSTRING -- command...
  local name="$1" code="$2" want="$3"
  shift 4
  "$@" >"$dir/stdout" 2>"$dir/stderr"
  local rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$name: exit $rc, wanted $code: $(head -3 "$dir/stderr")"; return; fi
  if ! grep -qF -- "$want" "$dir/stdout" "$dir/stderr"; then bad "$name: output lacks '$want': $(cat "$dir/stderr")"; return; fi
  ok
}
mkdir -p "$dir/adir" "$dir/adir.tflite"
expect_exit "regcmd decode a directory" 1 "rkdeploy: io: $dir/adir: is a directory" -- "$bin" regcmd decode "$dir/adir"
expect_exit "regcmd diff a directory" 1 "is a directory" -- "$bin" regcmd diff "$dir/adir" "$dir/adir"
expect_exit "inspect a directory" 1 "adir.tflite: is a directory" -- "$bin" inspect "$dir/adir.tflite"
expect_exit "unknown subcommand" 2 "rkdeploy: invalid: no subcommand 'nosuch'" -- "$bin" nosuch
expect_exit "subcommand typo" 2 "did you mean 'run'?" -- "$bin" rnu
expect_exit "missing positional" 2 "rkdeploy: invalid: model is required" -- "$bin" run
expect_exit "threads beyond the limit" 2 "--threads: Value 100000 not in range 0 to 1024" -- "$bin" run "$dir/x.npy" --threads 100000
expect_exit "negative threads" 2 "--threads" -- "$bin" sample grid --input "$dir/x.npy" --grid "$dir/g.npy" -o "$dir/y2.npy" --threads -1
expect_exit "version" 0 "dispatch: Highway" -- "$bin" --version
expect_exit "help" 0 "Usage: rkdeploy" -- "$bin" --help

# One JSON style (two-space indentation) and errors as JSON on stderr in --json mode.
json_style() {  # json_style NAME FILE
  "$py" - "$2" <<'PY' && ok || bad "$1: not two-space-indented JSON: $(head -3 "$2")"
import json, sys
text = open(sys.argv[1]).read()
json.loads(text)
lines = text.splitlines()
assert len(lines) > 2 and lines[0] == "{" and lines[1].startswith('  "') and not lines[1].startswith('   '), lines[:2]
PY
}
"$bin" inspect "$gs_model" --json >"$dir/j1.json" && json_style "inspect --json" "$dir/j1.json"
"$bin" sample grid --input "$dir/x.npy" --grid "$dir/g.npy" -o "$dir/yj.npy" --json >"$dir/j2.json" && json_style "sample grid --json" "$dir/j2.json"
"$bin" regcmd decode "$(dirname "$0")/../data/regcmd/two_conv_tasks.txt" --json >"$dir/j3.json" && json_style "regcmd decode --json" "$dir/j3.json"
"$bin" run "$dir/nope.onnx" --image x.png --json 2>"$dir/jerr.json" >/dev/null
rc=$?
[ "$rc" -eq 1 ] && ok || bad "--json error: exit $rc"
"$py" -c "import json; e = json.load(open('$dir/jerr.json'))['error']; assert e['kind'] == 'io' and 'x.png' in e['message'] and e['exit_code'] == 1, e" && ok || bad "--json error is not JSON: $(cat "$dir/jerr.json")"
"$bin" run "$dir/x.npy" --top -1 --json 2>"$dir/jerr2.json" >/dev/null
"$py" -c "import json; e = json.load(open('$dir/jerr2.json'))['error']; assert e['kind'] == 'invalid' and '--top' in e['message'] and e['exit_code'] == 2, e" && ok || bad "--json usage error is not JSON: $(cat "$dir/jerr2.json")"
expect_exit "top -1" 2 "--top: Value -1 not in range" -- "$bin" run "$dir/x.npy" --top -1
expect_exit "classes voc" 2 "--classes: voc not in {coco,ids}" -- "$bin" run "$dir/x.npy" --classes voc
expect_exit "hybrid-ratio nan" 2 "--hybrid-ratio: Value nan not in range" -- "$bin" analyze "$dir/x.npy" --hybrid-ratio nan
expect_exit "percentile nan" 2 "--percentile: Value nan not in range" -- "$bin" quantize "$dir/x.npy" --calib "$dir" -o "$dir/q.onnx" --method percentile --percentile nan
expect_exit "percentile with minmax" 2 "--percentile applies to --method percentile only" -- "$bin" quantize "$dir/x.npy" --calib "$dir" -o "$dir/q.onnx" --percentile 99
expect_exit "bench runs 0" 2 "--runs: Value 0 not in range" -- "$bin" bench "$dir/x.npy" --runs 0
expect_exit "plan layers 0" 2 "--layers: Value 0 not in range" -- "$bin" plan "$dir/x.npy" --layers 0
expect_exit "quiet after the subcommand" 0 "Usage" -- "$bin" help run --quiet

# Progress: a line on a terminal (script(1) gives the command one), none with --quiet or piped.
if [ -n "$models" ] && [ -f "$models/deimv2_s_arch_tiny.onnx" ] && command -v script >/dev/null; then
  m="$models/deimv2_s_arch_tiny"
  cmd="$bin bench $m.onnx --input images=$m.input_images.npy --input orig_target_sizes=$m.input_orig_target_sizes.npy --runs 5 --warmup 1"
  script -qec "$cmd" "$dir/tty.log" >/dev/null 2>&1
  grep -q "bench: measuring: 1/5" "$dir/tty.log" && ok || bad "no progress on a terminal: $(head -c 300 "$dir/tty.log")"
  script -qec "$cmd --quiet" "$dir/tty_q.log" >/dev/null 2>&1
  grep -q "bench: measuring" "$dir/tty_q.log" && bad "progress despite --quiet" || ok
  $cmd 2>"$dir/piped.err" >/dev/null
  [ ! -s "$dir/piped.err" ] && ok || bad "progress on a pipe: $(cat "$dir/piped.err")"
fi

# The NPU path on DEIMv2-S: its 16x16 stride-16 patch embedding (past the CNA's 3-bit stride
# fields) runs as a space-to-depth on the CPU and a 1 x 1 convolution on the NPU in run and
# compile (analyze lowers each convolution as it is and names it); its linear layers run as
# matrix products on the NPU; the int8 back ends refuse a float model instead of running it in
# float.
if [ -n "$models" ] && [ -f "$models/deimv2_s_arch_tiny.onnx" ]; then
  m="$models/deimv2_s_arch_tiny"
  "$py" -c "import numpy as np; np.savez('$dir/calib.npz', images=np.load('$m.input_images.npy'), orig_target_sizes=np.load('$m.input_orig_target_sizes.npy'))"
  # Every op quantized (--target none), so that the patch embedding is an int8 convolution (two
  # others read a Concat whose narrow branch one scale would collapse: they stay float).
  "$bin" quantize "$m.onnx" --calib "$dir/calib.npz" --target none -o "$dir/q.onnx" >/dev/null && ok || bad "quantize deim tiny"
  din=(--input images="$m.input_images.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy")
  # By default what rk3588-rkdeploy runs on its NPU is quantized: the patch embedding and the
  # linear layers are; LayerNorm, Softmax, the products of two activations and the sampling stay
  # float, the sampling coordinates too, and the sampling fusion survives.
  "$bin" quantize "$m.onnx" --calib "$dir/calib.npz" -o "$dir/qt.onnx" --json > "$dir/qt.json" && ok || bad "quantize deim tiny for the target"
  "$py" -c "
import json, sys
j = json.load(open(sys.argv[1])); c = j['cpu_placed']
assert j['target'] == 'rk3588-rkdeploy' and j['quantized_activations'] > 0 and j['float_selection'] > 0, j
for op in ('MatMul', 'LayerNormalization', 'Softmax', 'GridSample'): assert c.get(op, 0) > 0, (op, c)
assert c.get('Conv', 0) == 0 and c.get('Gemm', 0) == 0, c" "$dir/qt.json" && ok || bad "quantize --target: what stays float: $(cat "$dir/qt.json")"
  "$bin" inspect "$dir/qt.onnx" > "$dir/qt.inspect" 2>&1
  grep -q "fusion      [1-9][0-9]* deformable-attention site(s) fused, 0 similar" "$dir/qt.inspect" && ok || bad "the fusion did not survive quantization: $(grep fusion "$dir/qt.inspect")"
  # Every quantized convolution and linear layer runs on the NPU: those `run` counts on the CPU are
  # exactly the float ones it names (kept float by the quantizer: a collapsing Concat's readers,
  # attention's products of two activations).
  only_float_on_cpu() {  # NAME QDQ
    "$bin" run "$2" "${din[@]}" --backend sim > "$dir/stdout" 2> "$dir/stderr" || { bad "$1: $(tail -3 "$dir/stderr")"; return; }
    "$py" - "$dir/stderr" <<'PY' && ok || bad "$1: $(grep '^npu:' "$dir/stderr")"
import re, sys
err = open(sys.argv[1]).read()
conv = re.search(r"(\d+) convolution\(s\) on the RK3588 simulator \(strategy sorted-bs-multiplier, 0 with the following Add fused\), (\d+) on the CPU", err)
mm = re.search(r"(\d+) matrix product\(s\) as 1x1 convolutions, (\d+) on the CPU", err)
floats = [l.split(": ")[1] for l in err.splitlines() if l.startswith("  on the CPU: ") and l.endswith(": float (not quantized), runs on the CPU")]
f_conv = sum(n.endswith("Conv") for n in floats)
f_mm = sum(n.rsplit("/", 1)[-1].startswith(("MatMul", "Gemm")) for n in floats)
assert conv and mm and int(conv.group(1)) > 0 and int(mm.group(1)) > 0, err[:500]
assert int(conv.group(2)) == f_conv and int(mm.group(2)) == f_mm and f_conv + f_mm == len(floats), (conv.groups(), mm.groups(), floats)
PY
  }
  only_float_on_cpu "every quantized convolution and linear layer on the NPU" "$dir/qt.onnx"
  only_float_on_cpu "sim runs the patch embedding" "$dir/q.onnx"
  expect_exit "analyze names the convolution it lowers as it is" 0 "not lowered: /backbone/patch/Conv/qlinear" -- "$bin" analyze "$dir/q.onnx" "${din[@]}" --strategy per-channel
  expect_exit "analyze counts it" 0 "25 int8 convolutions (24 lowered)" -- "$bin" analyze "$dir/q.onnx" "${din[@]}" --strategy per-channel
  "$bin" compile "$dir/q.onnx" -o "$dir/npu_out" > "$dir/compile.log" 2>&1 && ok || bad "compile deim tiny: $(cat "$dir/compile.log")"
  "$py" -c "
import json, sys
m = json.load(open(sys.argv[1]))
names = [c['node'] for c in m['convolutions']]
assert '/backbone/patch/Conv/qlinear/as_1x1' in names, names[:5]
assert sum(n.endswith('MatMul/qlinear') or n.endswith('Gemm/qlinear') for n in names) > 0, names" "$dir/npu_out/manifest.json" && ok || bad "compile: the patch embedding and the matrix products in the manifest"
  expect_exit "int8 on a float model" 3 "rkdeploy: unsupported: $m.onnx: no quantized operator" -- "$bin" run "$m.onnx" "${din[@]}" --backend int8
  expect_exit "sim on a float model" 3 "no quantized operator" -- "$bin" run "$m.onnx" "${din[@]}" --backend sim
fi

echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
