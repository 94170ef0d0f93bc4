#!/usr/bin/python3
# `rkdeploy run --image PHOTO --json` on stdin, printed as examples/detect.c prints detections
# (the first 100, then the count), so the two can be compared with diff.
import json
import sys

d = json.load(sys.stdin)["detections"]
for e in d[:100]:
    print("%-14s %.3f  [%.1f, %.1f, %.1f, %.1f]" % ((e["class"], e["score"]) + tuple(e["box_xyxy"])))
print("%d detection(s)" % len(d))
