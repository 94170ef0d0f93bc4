#!/usr/bin/env bash
# The fuzz campaign behind docs/fuzzing.md: every libFuzzer target of build-fuzz (make fuzz
# builds them) for RUNS executions (default 1000000) from the committed seeds plus the
# corpus earlier runs grew, one line of figures per target in build-fuzz/campaign.tsv:
#   target  executions  seconds  exec/s  coverage(cov:)  features(ft:)  corpus  result
# A crash stops that target (libFuzzer writes crash-* into build-fuzz/) and is reported as
# "CRASH"; the script exits non-zero if any target crashed.
# Usage: scripts/fuzz_campaign.sh [RUNS] [TARGET...]
set -u
cd "$(dirname "$0")/.."
runs="${1:-1000000}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(npy onnx tfjs tflite regcmd plan config capture prepare coco artifact)
out=build-fuzz/campaign.tsv
[ -f "$out" ] || printf 'target\texecutions\tseconds\texec_per_s\tcov\tft\tcorpus\tresult\n' >"$out"
status=0
for t in "${targets[@]}"; do
  bin="build-fuzz/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "missing $bin (make fuzz)"; status=1; continue; }
  mkdir -p "build-fuzz/corpus-$t"
  seeds="fuzz/corpus/$t"
  log="build-fuzz/campaign-$t.log"
  start=$(date +%s)
  "$bin" -runs="$runs" -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/ \
    "build-fuzz/corpus-$t" $( [ -d "$seeds" ] && echo "$seeds" ) >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
  corp=$(echo "$last" | grep -o 'corp: [0-9]*' | grep -o '[0-9]*')
  result=ok
  [ "$rc" -eq 0 ] || { result=CRASH; status=1; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${execs:-?}" "$secs" "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result" | tee -a "$out"
done
exit $status
