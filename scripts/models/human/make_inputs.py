#!/usr/bin/python3
"""Writes OUT_DIR/<model>.input.npy for every model of models.json from one photo:
stretched to the model's size (skimage.transform.resize, bilinear, anti-aliased), then
value * scale + offset in the model's layout and dtype.

usage: make_inputs.py PHOTO OUT_DIR
"""
import json
import os
import sys

import numpy as np
from skimage import io, transform


def main():
    photo, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.json")))
    img = io.imread(photo)[..., :3].astype(np.float64)
    os.makedirs(out, exist_ok=True)
    for m in cfg["models"]:
        h, w = m["size"]
        r = transform.resize(img, (h, w), order=1, anti_aliasing=True, preserve_range=True)
        if m["dtype"] == "int32":
            x = np.clip(np.rint(r), 0, 255).astype(np.int32)
        else:
            x = (r * m["scale"] + m["offset"]).astype(np.float32)
        if m["layout"] == "NCHW":
            x = x.transpose(2, 0, 1)
        np.save(os.path.join(out, m["name"] + ".input.npy"), np.ascontiguousarray(x[None]))


if __name__ == "__main__":
    main()
