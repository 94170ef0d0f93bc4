#!/usr/bin/python3
"""Writes the evaluation set of `rkdeploy eval` in tests and docs (docs/evaluation.md) into DIR.

Sources: the real photographs and scenes Debian's packages ship that are NOT in the
calibration set (scripts/models/human/calib_photos.sh): skimage's astronaut, brick, cell,
clock_motion, gravel, horse, moon, page, phantom, text and bw_text (python3-skimage),
matplotlib's grace_hopper and Minduka_Present_Blue_Pack (python-matplotlib-data, a dependency
of python3-skimage), SciPy's face (a raccoon) and ascent (python3-scipy, likewise). Each source
gives deterministic views: the photo, its mirror image, two scales, five crops (four corners
and the centre, 60 % of each side), the mirrored crops and mirrored scales, a quarter turn
and a greyed copy, as PNG (lossless, so every machine decodes the same pixels).

Usage: eval_photos.py DIR
"""
import bz2
import os
import pickle
import sys

import numpy as np
from PIL import Image, ImageOps

SKIMAGE = "/usr/lib/python3/dist-packages/skimage/data"
MPL = "/usr/share/matplotlib/mpl-data/sample_data"
SCIPY = "/usr/lib/python3/dist-packages/scipy/misc"


def scipy_image(name):
    path = os.path.join(SCIPY, name)
    if name == "face.dat":  # bz2-compressed raw RGB, 768 x 1024
        with open(path, "rb") as f:
            raw = bz2.decompress(f.read())
        return Image.fromarray(np.frombuffer(raw, dtype=np.uint8).reshape(768, 1024, 3))
    with open(path, "rb") as f:  # ascent: a pickled 512 x 512 array
        return Image.fromarray(np.asarray(pickle.load(f)).astype(np.uint8))


def sources():
    for name in ["astronaut.png", "brick.png", "cell.png", "clock_motion.png", "gravel.png", "horse.png", "moon.png", "page.png", "phantom.png",
                 "text.png", "bw_text.png"]:
        yield os.path.splitext(name)[0], Image.open(os.path.join(SKIMAGE, name))
    for name in ["grace_hopper.jpg", "Minduka_Present_Blue_Pack.png"]:
        yield os.path.splitext(name)[0].lower(), Image.open(os.path.join(MPL, name))
    yield "raccoon", scipy_image("face.dat")
    yield "ascent", scipy_image("ascent.dat")


def views(img):
    w, h = img.size
    cw, ch = int(w * 0.6), int(h * 0.6)
    crops = {"crop_tl": (0, 0), "crop_tr": (w - cw, 0), "crop_bl": (0, h - ch), "crop_br": (w - cw, h - ch), "crop_c": ((w - cw) // 2, (h - ch) // 2)}
    yield "full", img
    yield "mirror", ImageOps.mirror(img)
    for s in (0.5, 0.75):
        scaled = img.resize((max(1, int(w * s)), max(1, int(h * s))), Image.BICUBIC)
        yield "scale%03d" % int(s * 100), scaled
        yield "scale%03d_mirror" % int(s * 100), ImageOps.mirror(scaled)
    for name, (x, y) in crops.items():
        c = img.crop((x, y, x + cw, y + ch))
        yield name, c
        yield name + "_mirror", ImageOps.mirror(c)
    yield "turn", img.transpose(Image.ROTATE_90)
    yield "grey", ImageOps.grayscale(img).convert("RGB")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, img in sources():
        img = img.convert("RGBA") if img.mode in ("P", "LA") else img
        if img.mode == "RGBA":  # composite transparency on white
            bg = Image.new("RGB", img.size, (255, 255, 255))
            bg.paste(img, mask=img.split()[3])
            img = bg
        img = img.convert("RGB")
        for view, v in views(img):
            v.save(os.path.join(out, "%s_%s.png" % (name, view)))
            n += 1
    print("%d photos in %s" % (n, out))


if __name__ == "__main__":
    main()
