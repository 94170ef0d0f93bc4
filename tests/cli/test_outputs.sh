#!/usr/bin/env bash
# The output discipline (docs/cli.md, "Outputs") for every command that writes: destinations
# checked before the work, nothing the command did not create deleted or replaced, all
# outputs of a run published together or none, no temporaries left after a failure or a
# signal.
# Usage: test_outputs.sh RKDEPLOY MODELS_DIR INT8_TFLITE
set -u
bin="$1" models="$2" tfl="$3"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fails=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect NAME CODE SUBSTRING -- command...: exit status CODE, SUBSTRING in stderr, and no
# hidden temporary (.NAME.rkdeploy-*) anywhere under $dir afterwards.
expect() {
  local name="$1" code="$2" want="$3"
  shift 4
  "$@" >"$dir/stdout" 2>"$dir/stderr"
  local rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$name: exit $rc, wanted $code: $(head -3 "$dir/stderr")"; return 1; fi
  if [ -n "$want" ] && ! grep -qF -- "$want" "$dir/stderr"; then bad "$name: stderr lacks '$want': $(cat "$dir/stderr")"; return 1; fi
  if [ -n "$(find "$dir" -name '*.rkdeploy-*')" ]; then bad "$name: temporaries left: $(find "$dir" -name '*.rkdeploy-*')"; return 1; fi
  ok
}
unchanged() {  # unchanged NAME FILE CONTENT
  [ "$(cat "$2" 2>/dev/null)" = "$3" ] && ok || bad "$1: $2 was changed or removed"
}

m="$models/deimv2_s_arch_tiny"
deim_in=(--input images="$m.input_images.npy" --input orig_target_sizes="$m.input_orig_target_sizes.npy")
photo=/usr/lib/python3/dist-packages/skimage/data/chelsea.png

# --- compile -o: a folder the command creates, never one the user's data lives in.
mkdir d && cp "$tfl" d/a.tflite
expect "compile into the input's folder" 2 "holds an input of this command" -- "$bin" compile d/a.tflite -o d
cmp -s "$tfl" d/a.tflite && ok || bad "compile -o d: the input model was damaged"
echo KEEP >f
expect "compile onto a file" 2 "exists and is not a folder" -- "$bin" compile "$tfl" -o f
unchanged "compile -o f" f KEEP
expect "compile -o ." 2 "is the working folder" -- "$bin" compile "$tfl" -o .
[ ! -e ../..tmp ] && ok || bad "compile -o . left ..tmp"
mkdir full && echo KEEP >full/mine.txt
expect "compile into a non-empty folder" 2 "not empty" -- "$bin" compile "$tfl" -o full
unchanged "compile -o full" full/mine.txt KEEP
# --force replaces only a previous compile output, and only the files its manifest lists: a
# folder of the user's (here, like a home folder: files, a subfolder, a hidden file) is
# refused whole and nothing in it is touched.
mkdir -p full/sub && echo KEEP >full/sub/deep.txt && echo KEEP >full/.hidden
expect "compile --force onto a user's folder" 2 "replaces only a folder that this command wrote before" -- "$bin" compile "$tfl" -o full --force
unchanged "compile --force -o full" full/mine.txt KEEP
unchanged "compile --force -o full" full/sub/deep.txt KEEP
unchanged "compile --force -o full" full/.hidden KEEP
ln -s full linked
expect "compile --force through a symbolic link" 2 "symbolic link" -- "$bin" compile "$tfl" -o linked --force
unchanged "compile --force -o linked" full/mine.txt KEEP
expect "compile --force a new folder" 0 "" -- "$bin" compile "$tfl" -o prev
expect "compile --force onto a previous output" 0 "" -- "$bin" compile "$tfl" -o prev --force
[ -f prev/manifest.json ] && ok || bad "compile --force did not replace a previous output"
echo KEEP >prev/conv000/notes.txt
expect "compile --force onto an output with a foreign file" 2 "conv000/notes.txt" -- "$bin" compile "$tfl" -o prev --force
unchanged "compile --force, foreign file" prev/conv000/notes.txt KEEP
rm prev/conv000/notes.txt
ln -s ../f prev/manifest-link
expect "compile --force onto an output with a symbolic link" 2 "manifest-link" -- "$bin" compile "$tfl" -o prev --force
rm prev/manifest-link
# A forged manifest that lists a file outside the folder removes nothing outside it.
echo '{"written_by": "rkdeploy compile", "files": ["manifest.json", "../f", "/etc/hostname"]}' >forged.json
mkdir forged && cp forged.json forged/manifest.json
expect "compile --force onto a forged manifest" 0 "" -- "$bin" compile "$tfl" -o forged --force
unchanged "compile --force, forged manifest" f KEEP
echo '{"target": "rk3588"}' >notours.json
mkdir notours && cp notours.json notours/manifest.json
expect "compile --force onto a foreign manifest" 2 "not a manifest of rkdeploy compile" -- "$bin" compile "$tfl" -o notours --force
expect "compile --force into the input's folder" 2 "holds an input" -- "$bin" compile d/a.tflite -o d --force
cmp -s "$tfl" d/a.tflite && ok || bad "compile --force -o d: the input model was damaged"
expect "compile, parent missing" 1 "does not exist" -- "$bin" compile "$tfl" -o nodir/out
mkdir empty
expect "compile into an empty folder" 0 "" -- "$bin" compile "$tfl" -o empty
[ -f empty/manifest.json ] && ok || bad "compile into an empty folder wrote no manifest"
# A compile that fails after it began (a float model has no int8 convolution) leaves nothing.
expect "compile a float model" 3 "no quantized operator" -- "$bin" compile "$m.onnx" -o floatout
[ ! -e floatout ] && ok || bad "a failed compile left its output folder"

# --- run --output-dir: checked before the inference, all outputs or none.
mkdir od && mkdir od/scores.npy && echo KEEP >od/boxes.npy && echo KEEP >od/labels.npy
expect "run, one output is a folder" 2 "od/scores.npy: is a folder" -- "$bin" run "$m.onnx" "${deim_in[@]}" --output-dir od
unchanged "run --output-dir od" od/boxes.npy KEEP
unchanged "run --output-dir od" od/labels.npy KEEP
[ ! -s stdout ] && ok || bad "run --output-dir od: ran before checking the destinations: $(cat stdout)"
expect "run --output-dir onto a file" 2 "f: exists and is not a folder" -- "$bin" run "$m.onnx" "${deim_in[@]}" --output-dir f
[ ! -s stdout ] && ok || bad "run --output-dir f: ran before checking the destination"
unchanged "run --output-dir f" f KEEP
expect "run --output-dir, parent missing" 1 "does not exist" -- "$bin" run "$m.onnx" "${deim_in[@]}" --output-dir nodir/od
expect "run --output-dir new" 0 "" -- "$bin" run "$m.onnx" "${deim_in[@]}" --output-dir new
[ -f new/boxes.npy ] && [ -f new/labels.npy ] && [ -f new/scores.npy ] && ok || bad "run --output-dir new: outputs missing"
echo KEEP >new/notes.txt
expect "run --output-dir again" 0 "" -- "$bin" run "$m.onnx" "${deim_in[@]}" --output-dir new
unchanged "run --output-dir again" new/notes.txt KEEP
# An input (of the right shape, so that the run gets as far as declaring its outputs) that one
# of the outputs would replace.
cp "$m.input_images.npy" new/boxes.npy
expect "run, output is the input" 2 "is also an input" -- "$bin" run "$m.onnx" --input images=new/boxes.npy \
  --input orig_target_sizes="$m.input_orig_target_sizes.npy" --output-dir new
cmp -s "$m.input_images.npy" new/boxes.npy && ok || bad "run, output is the input: the input was replaced"
if [ -f "$photo" ]; then
  expect "run --draw, parent missing" 1 "nodir/x.png: the folder" -- "$bin" run "$m.onnx" --image "$photo" --draw nodir/x.png
  [ ! -s stdout ] && ok || bad "run --draw nodir: printed detections before checking the destination"
  expect "run --draw a folder" 2 "is a folder" -- "$bin" run "$m.onnx" --image "$photo" --draw od
  expect "run --draw" 0 "" -- "$bin" run "$m.onnx" --image "$photo" --draw x.png
  [ -s x.png ] && ok || bad "run --draw wrote nothing"
fi

# --- quantize -o: checked before calibration; the model is never its own output.
/usr/bin/python3 - "$m" <<'PY'
import sys, numpy as np
m = sys.argv[1]
np.savez("calib.npz", images=np.load(m + ".input_images.npy"), orig_target_sizes=np.load(m + ".input_orig_target_sizes.npy"))
PY
cp "$m.onnx" model.onnx
expect "quantize, parent missing" 1 "nodir/q.onnx: the folder" -- "$bin" quantize model.onnx --calib calib.npz -o nodir/q.onnx
[ ! -s stdout ] && ok || bad "quantize -o nodir: calibrated before checking the destination"
expect "quantize onto its input" 2 "is also an input" -- "$bin" quantize model.onnx --calib calib.npz -o model.onnx
cmp -s "$m.onnx" model.onnx && ok || bad "quantize -o model.onnx damaged the model"
expect "quantize onto a device" 2 "not a regular file" -- "$bin" quantize model.onnx --calib calib.npz -o /dev/null
expect "quantize" 0 "" -- "$bin" quantize model.onnx --calib calib.npz -o q.onnx
[ -s q.onnx ] && ok || bad "quantize wrote nothing"

# --- reports and samples.
expect "plan --html, parent missing" 1 "nodir/p.html: the folder" -- "$bin" plan "$m.onnx" --target rk3588-rkdeploy "${deim_in[@]}" --html nodir/p.html
expect "accuracy --html, parent missing" 1 "nodir/a.html: the folder" -- "$bin" accuracy model.onnx q.onnx "${deim_in[@]}" --html nodir/a.html
expect "analyze --html, parent missing" 1 "nodir/n.html: the folder" -- "$bin" analyze q.onnx "${deim_in[@]}" --html nodir/n.html
expect "plan --html twice" 2 "named twice" -- "$bin" plan "$m.onnx" --target rk3588-rkdeploy "${deim_in[@]}" --html r.html --markdown r.html
expect "demo --save onto a file" 2 "exists and is not a folder" -- "$bin" demo --runs 1 --save f
expect "demo --draw without --models" 2 "--draw needs --models" -- "$bin" demo --runs 1 --draw x2.png

# --- signals: SIGINT and SIGTERM during the work remove the temporaries; the process ends by
# the signal (128 + N). Job control on: without it bash starts background jobs with SIGINT
# ignored, and rkdeploy keeps an inherited ignore (as nohup needs for SIGHUP).
set -m
for sig in INT TERM; do
  "$bin" run "$m.onnx" "${deim_in[@]}" --repeat 100000 --output-dir "sig$sig" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    [ -n "$(find . -maxdepth 1 -name ".sig$sig.rkdeploy-*")" ] && break
    sleep 0.05
  done
  [ -n "$(find . -maxdepth 1 -name ".sig$sig.rkdeploy-*")" ] && ok || bad "SIG$sig: the temporary output folder never appeared"
  sleep 0.3
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ "$rc" -eq "$want" ] && ok || bad "SIG$sig: exit $rc, wanted $want"
  [ -n "$(find . -name '*.rkdeploy-*')" ] && bad "SIG$sig: temporaries left: $(find . -name '*.rkdeploy-*')" || ok
  [ ! -e "sig$sig" ] && ok || bad "SIG$sig: a partial output folder was published"
done
# Under nohup, SIGHUP does not end the command.
nohup "$bin" run "$m.onnx" "${deim_in[@]}" --repeat 200 --output-dir sigHUP >/dev/null 2>&1 &
pid=$!
sleep 0.5
kill -s HUP "$pid" 2>/dev/null
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] && [ -f sigHUP/boxes.npy ] && ok || bad "nohup: SIGHUP ended the command (exit $rc)"
set +m

echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
