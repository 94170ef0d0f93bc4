#!/bin/bash
# rkdeploy export --rknn-custom-op on the DEIMv2-S architecture (default and discrete sampling,
# the models_tiny fixture): the file holds one cstMSDeformAttn node per decoder layer with
# integer attributes and no rkdeploy-domain node; rkdeploy runs it (custom nodes expanded back)
# with outputs byte-identical to the original's; so does --unfused (every GridSample a
# cstGridSample node); the plugin libraries, driven through the
# vendor header's callbacks on each site's inputs as the executor computed them, give the
# executor's values byte for byte (tests/plugins/rknn_plugin_model.cc); with the custom nodes
# expanded into standard operators by an independent script (rknn_expand.py), ONNX Runtime
# gives the original's outputs within tests/common/tolerance.h's model_agree (ONNX Runtime's
# kernels order the sums differently in the two graph forms) and the same labels.
#   test_rknn_custom_op.sh RKDEPLOY PLUGIN_MODEL_HARNESS MSDA_PLUGIN GRID_SAMPLE_PLUGIN MODELS_DIR
set -euo pipefail
rk="$1"; harness="$2"; msda="$3"; grid="$4"; models="$5"
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for stem in deimv2_s_arch_tiny deimv2_s_arch_discrete_tiny; do
  ins=("images=$models/$stem.input_images.npy" "orig_target_sizes=$models/$stem.input_orig_target_sizes.npy")
  "$rk" export "$models/$stem.onnx" --rknn-custom-op -o "$work/$stem.cst.onnx" > "$work/export.txt"
  grep -q "wrote $work/$stem.cst.onnx: 2 cstMSDeformAttn" "$work/export.txt" || { cat "$work/export.txt"; exit 1; }
  [ -s "$work/rkdeploy_rknn_ops.py" ]
  /usr/bin/python3 - "$work/$stem.cst.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
cst = [n for n in m.graph.node if n.op_type.startswith("cst")]
assert [n.op_type for n in cst] == ["cstMSDeformAttn"] * 2, [n.op_type for n in cst]
assert all(n.domain == "" for n in m.graph.node), "a node outside the default domain"
for n in cst:
    assert {a.name for a in n.attribute} == {"level_h", "level_w", "points", "method"}, n.attribute
    assert all(a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS) for a in n.attribute)
    assert [len(n.input), len(n.output)] == [3, 1]
PY
  "$rk" run "$models/$stem.onnx" "${ins[@]/#/--input=}" --output-dir "$work/orig" > /dev/null 2>&1
  "$rk" run "$work/$stem.cst.onnx" "${ins[@]/#/--input=}" --output-dir "$work/cst" > /dev/null 2>&1
  for f in "$work"/orig/*.npy; do cmp "$f" "$work/cst/$(basename "$f")"; done
  "$harness" "$work/$stem.cst.onnx" "$msda" "$grid" "${ins[@]}" | tee "$work/harness.txt"
  rm -rf "$work/orig" "$work/cst"
  echo "$stem: exported with 2 custom nodes; rkdeploy runs it byte-identical to the original; the plugin equals the executor on every site"
done
# --unfused (the planner's custom-op-cpu): every GridSample a cstGridSample node, computed by
# librkcst_grid_sample.so as the executor computes the GridSample.
stem=deimv2_s_arch_tiny
ins=("images=$models/$stem.input_images.npy" "orig_target_sizes=$models/$stem.input_orig_target_sizes.npy")
"$rk" export "$models/$stem.onnx" --rknn-custom-op --unfused -o "$work/unfused.onnx" > "$work/export.txt"
grep -q "wrote $work/unfused.onnx: 0 cstMSDeformAttn and 6 cstGridSample" "$work/export.txt" || { cat "$work/export.txt"; exit 1; }
"$rk" run "$models/$stem.onnx" "${ins[@]/#/--input=}" --output-dir "$work/orig" > /dev/null 2>&1
"$rk" run "$work/unfused.onnx" "${ins[@]/#/--input=}" --output-dir "$work/unfused" > /dev/null 2>&1
for f in "$work"/orig/*.npy; do cmp "$f" "$work/unfused/$(basename "$f")"; done
"$harness" --unfused "$work/unfused.onnx" "$msda" "$grid" "${ins[@]}" > "$work/harness.txt"
tail -1 "$work/harness.txt"
grep -q "^6 custom site(s), 0 differing" "$work/harness.txt"
echo "$stem --unfused: 6 cstGridSample nodes; rkdeploy runs it byte-identical to the original; the plugin equals the executor on every site"
# The module beside OUT is replaced only when a previous export wrote it: a user's own file of
# that name, and a symbolic link of that name, are refused and left as they were.
mkdir -p "$work/own" "$work/link" "$work/outside"
echo "my own module" > "$work/own/rkdeploy_rknn_ops.py"
echo "outside the folder" > "$work/outside/target.py"
ln -s "$work/outside/target.py" "$work/link/rkdeploy_rknn_ops.py"
for d in own link; do
  rc=0
  "$rk" export "$models/$stem.onnx" --rknn-custom-op -o "$work/$d/m.onnx" > /dev/null 2> "$work/err" || rc=$?
  [ "$rc" = 2 ] && grep -q "$d/rkdeploy_rknn_ops.py: exists and export --rknn-custom-op writes its module there" "$work/err" ||
    { echo "export over $d/rkdeploy_rknn_ops.py: exit $rc"; cat "$work/err"; exit 1; }
  [ ! -e "$work/$d/m.onnx" ] || { echo "a refused export wrote $d/m.onnx"; exit 1; }
done
[ "$(cat "$work/own/rkdeploy_rknn_ops.py")" = "my own module" ] && [ "$(cat "$work/outside/target.py")" = "outside the folder" ]
"$rk" export "$models/$stem.onnx" --rknn-custom-op --unfused -o "$work/again.onnx" > /dev/null  # its own module, written before: replaced
echo "export --rknn-custom-op: a module it did not write, and a link, refused and left alone"
# ONNX Runtime on the custom nodes expanded back (the default method: GridSample).
/usr/bin/python3 "$here/tests/cli/rknn_expand.py" "$work/$stem.cst.onnx" "$work/expanded.onnx"
node "$here/scripts/models/human/ort_reference.js" "$models/$stem.onnx" "$work/ort.orig" "${ins[@]}"
node "$here/scripts/models/human/ort_reference.js" "$work/expanded.onnx" "$work/ort.expanded" "${ins[@]}"
/usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
for k in ("boxes", "scores", "labels"):
    a, e = np.load(f"{d}/ort.expanded/{k}.npy"), np.load(f"{d}/ort.orig/{k}.npy")
    if k == "labels":
        assert (a == e).all(), k
        continue
    err = float(np.abs(a - e).max())
    assert err <= float(np.abs(e).max()) / 16384, (k, err)  # tests/common/tolerance.h: model_agree
    print(f"ONNX Runtime, custom nodes expanded back: {k} within {err:.3g} of the original's (model_agree)")
PY
# The planner names the plugins as the way to its custom-op-cpu and fused-fallback variants.
"$rk" plan "$models/$stem.onnx" --target rk3588-rknn-2.3.2 "${ins[@]/#/--input=}" --variant fused-fallback --variant custom-op-cpu \
  --runs 1 --warmup 0 > "$work/plan.txt" 2> /dev/null
grep -q "^fused-fallback: .*rknn-custom-op.*librkcst_msdeform_attn.so" "$work/plan.txt"
grep -q "^custom-op-cpu: .*rknn-custom-op --unfused.*librkcst_grid_sample.so" "$work/plan.txt"
echo "plan: fused-fallback and custom-op-cpu name the plugins"
