#!/usr/bin/python3
"""`rkdeploy eval --results` against a second implementation of COCO's bbox evaluation.

The reference below is written from COCO's published definition (cocoapi's cocoeval.py:
evaluateImg, accumulate, summarize; iouType bbox, useCats 1) in float64 NumPy, independently
of src/quant/detection_metrics.cc. Random cases attack the rules that matter: equal scores
(stable order), crowd boxes (intersection over the detection's area, matched many times),
boxes on the area-range bounds (32^2, 96^2), images without ground truth or without
detections, categories without ground truth, more than maxDets detections per image and
category, exact-IoU ties at the thresholds. Every one of the twelve numbers and every
category's AP must agree to 1e-12 (only the order of summation differs).

Usage: test_eval_coco.py RKDEPLOY [CASES]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

IOU_THRS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
REC_THRS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
AREAS = [[0, 1e10], [0, 32**2], [32**2, 96**2], [96**2, 1e10]]
MAX_DETS = [1, 10, 100]


def box_iou(d, g, crowd):
    iw = min(d[0] + d[2], g[0] + g[2]) - max(d[0], g[0])
    ih = min(d[1] + d[3], g[1] + g[3]) - max(d[1], g[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = d[2] * d[3] if crowd else d[2] * d[3] + g[2] * g[3] - inter
    return inter / union if union > 0 else 0.0


def evaluate_image(gts, dts, area):
    """gts: list of dicts (bbox, area, iscrowd); dts: sorted by score, truncated."""
    if not gts and not dts:
        return None
    lo, hi = area
    ign = [1 if (g["iscrowd"] or g["area"] < lo or g["area"] > hi) else 0 for g in gts]
    order = sorted(range(len(gts)), key=lambda i: ign[i])  # stable
    gts = [gts[i] for i in order]
    ign = [ign[i] for i in order]
    crowd = [g["iscrowd"] for g in gts]
    T, D, G = len(IOU_THRS), len(dts), len(gts)
    ious = np.zeros((D, G))
    for di, d in enumerate(dts):
        for gi, g in enumerate(gts):
            ious[di, gi] = box_iou(d["bbox"], g["bbox"], crowd[gi])
    gtm = np.zeros((T, G), dtype=bool)
    dtm = np.zeros((T, D), dtype=bool)
    dt_ig = np.zeros((T, D), dtype=bool)
    for ti, t in enumerate(IOU_THRS):
        for di in range(D):
            best = min(t, 1 - 1e-10)
            m = -1
            for gi in range(G):
                if gtm[ti, gi] and not crowd[gi]:
                    continue
                if m > -1 and ign[m] == 0 and ign[gi] == 1:
                    break
                if ious[di, gi] < best:
                    continue
                best = ious[di, gi]
                m = gi
            if m == -1:
                continue
            dt_ig[ti, di] = ign[m] == 1
            dtm[ti, di] = True
            gtm[ti, m] = True
    out_of_range = np.array([d["bbox"][2] * d["bbox"][3] < lo or d["bbox"][2] * d["bbox"][3] > hi for d in dts], dtype=bool)
    dt_ig = np.logical_or(dt_ig, np.logical_and(~dtm, out_of_range[None, :] if D else dt_ig))
    return {"scores": np.array([d["score"] for d in dts]), "dtm": dtm, "dt_ig": dt_ig, "gt_ig": np.array(ign, dtype=bool)}


def coco_eval(gt, dt):
    img_ids = sorted(i["id"] for i in gt["images"])
    cat_ids = sorted(c["id"] for c in gt["categories"])
    K, A, M, T, R = len(cat_ids), len(AREAS), len(MAX_DETS), len(IOU_THRS), len(REC_THRS)
    precision = -np.ones((T, R, K, A, M))
    recall = -np.ones((T, K, A, M))
    for ki, c in enumerate(cat_ids):
        for ai, area in enumerate(AREAS):
            evals = []
            for i in img_ids:
                gts = [g for g in gt["annotations"] if g["image_id"] == i and g["category_id"] == c]
                dts = [d for d in dt if d["image_id"] == i and d["category_id"] == c]
                dts = sorted(dts, key=lambda d: -d["score"])[: MAX_DETS[-1]]  # stable
                e = evaluate_image(gts, dts, area)
                if e is not None:
                    evals.append(e)
            if not evals:
                continue
            for mi, md in enumerate(MAX_DETS):
                scores = np.concatenate([e["scores"][:md] for e in evals])
                inds = np.argsort(-scores, kind="mergesort")
                dtm = np.concatenate([e["dtm"][:, :md] for e in evals], axis=1)[:, inds]
                dt_ig = np.concatenate([e["dt_ig"][:, :md] for e in evals], axis=1)[:, inds]
                gt_ig = np.concatenate([e["gt_ig"] for e in evals])
                npig = np.count_nonzero(gt_ig == 0)
                if npig == 0:
                    continue
                tps = np.cumsum(np.logical_and(dtm, ~dt_ig), axis=1).astype(np.float64)
                fps = np.cumsum(np.logical_and(~dtm, ~dt_ig), axis=1).astype(np.float64)
                for ti in range(T):
                    tp, fp = tps[ti], fps[ti]
                    nd = len(tp)
                    rc = tp / npig
                    pr = (tp / (fp + tp + np.spacing(1))).tolist()
                    recall[ti, ki, ai, mi] = rc[-1] if nd else 0
                    for i in range(nd - 1, 0, -1):
                        if pr[i] > pr[i - 1]:
                            pr[i - 1] = pr[i]
                    q = np.zeros(R)
                    idx = np.searchsorted(rc, REC_THRS, side="left")
                    for ri, pi in enumerate(idx):
                        if pi >= nd:
                            break
                        q[ri] = pr[pi]
                    precision[ti, :, ki, ai, mi] = q

    def mean(a):
        a = a[a > -1]
        return float(np.mean(a)) if a.size else -1.0

    def ap(t=None, area=0, md=2):
        p = precision[:, :, :, area, md] if t is None else precision[[t], :, :, area, md]
        return mean(p)

    def ar(area=0, md=2):
        return mean(recall[:, :, area, md])

    summary = [ap(), ap(0), ap(5), ap(None, 1), ap(None, 2), ap(None, 3), ar(0, 0), ar(0, 1), ar(0, 2), ar(1), ar(2), ar(3)]
    per_cat = [mean(precision[:, :, k, 0, 2]) for k in range(K)]
    return summary, per_cat


def random_case(rng):
    n_img = int(rng.integers(1, 7))
    n_cat = int(rng.integers(1, 5))
    images = [{"id": int(i) * 3 + 1, "file_name": "%d.jpg" % i} for i in range(n_img)]
    cats = [{"id": int(c) * 2 + 1, "name": "c%d" % c} for c in range(n_cat)]
    anns, dts = [], []
    coarse = rng.random() < 0.5  # integer boxes: exact ties in IoU and area bounds
    for im in images:
        for _ in range(int(rng.integers(0, 8))):
            if coarse:
                w, h = float(rng.choice([8, 16, 32, 48, 96, 100])), float(rng.choice([8, 16, 32, 48, 96, 100]))
                x, y = float(rng.integers(0, 200)), float(rng.integers(0, 200))
            else:
                w, h = float(rng.uniform(1, 150)), float(rng.uniform(1, 150))
                x, y = float(rng.uniform(0, 300)), float(rng.uniform(0, 300))
            area = w * h if rng.random() < 0.8 else float(rng.choice([32.0**2, 96.0**2, w * h * 0.7]))
            anns.append({"id": len(anns) + 1, "image_id": im["id"], "category_id": cats[int(rng.integers(0, n_cat))]["id"],
                         "bbox": [x, y, w, h], "area": area, "iscrowd": int(rng.random() < 0.15)})
        # Detections: perturbed copies of ground truth (some in another category) and strays.
        own = [a for a in anns if a["image_id"] == im["id"]]
        for a in own:
            for _ in range(int(rng.integers(0, 3))):
                j = 0 if coarse else 8
                x, y, w, h = a["bbox"]
                b = [x + float(rng.integers(-j, j + 1)) if coarse else x + rng.normal(0, 4), y + (0 if coarse else rng.normal(0, 4)),
                     max(0.5, w + (0 if coarse else rng.normal(0, 6))), max(0.5, h + (0 if coarse else rng.normal(0, 6)))]
                cat = a["category_id"] if rng.random() < 0.85 else cats[int(rng.integers(0, n_cat))]["id"]
                dts.append({"image_id": im["id"], "category_id": cat, "bbox": [float(v) for v in b], "score": 0.0})
        for _ in range(int(rng.integers(0, 4))):
            dts.append({"image_id": im["id"], "category_id": cats[int(rng.integers(0, n_cat))]["id"],
                        "bbox": [float(rng.uniform(0, 300)), float(rng.uniform(0, 300)), float(rng.uniform(1, 120)), float(rng.uniform(1, 120))],
                        "score": 0.0})
    # Scores from a few levels: many ties, kept in input order.
    levels = [0.9, 0.7, 0.5, 0.3] if rng.random() < 0.5 else None
    for d in dts:
        d["score"] = float(rng.choice(levels)) if levels else float(rng.random())
    if rng.random() < 0.2 and images:  # more than maxDets in one image and category
        for _ in range(120):
            dts.append({"image_id": images[0]["id"], "category_id": cats[0]["id"], "bbox": [float(rng.uniform(0, 50)), float(rng.uniform(0, 50)), 30.0, 30.0],
                        "score": float(rng.random())})
    return {"images": images, "annotations": anns, "categories": cats}, dts


def main():
    rkdeploy = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    rng = np.random.default_rng(20261205)
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        gt_path, dt_path = os.path.join(tmp, "gt.json"), os.path.join(tmp, "dt.json")
        for case in range(cases):
            gt, dt = random_case(rng)
            with open(gt_path, "w") as f:
                json.dump(gt, f)
            with open(dt_path, "w") as f:
                json.dump(dt, f)
            ours = json.loads(subprocess.run([rkdeploy, "eval", "--results", dt_path, "--annotations", gt_path, "--json"], check=True,
                                             capture_output=True, text=True).stdout)
            summary, per_cat = coco_eval(gt, dt)
            got = list(ours["metrics"].values())
            got_cat = [c["AP"] for c in ours["categories"]]
            for name, want, have in list(zip(ours["metrics"].keys(), summary, got)) + [("category AP", w, h) for w, h in zip(per_cat, got_cat)]:
                err = abs(want - have)
                worst = max(worst, err)
                if err > 1e-12:
                    shutil_keep = os.path.join(os.environ.get("TMPDIR", "/tmp"), "eval_coco_case_%d" % case)
                    os.makedirs(shutil_keep, exist_ok=True)
                    for p in (gt_path, dt_path):
                        with open(p) as src, open(os.path.join(shutil_keep, os.path.basename(p)), "w") as dst:
                            dst.write(src.read())
                    print("case %d: %s reference %.15g rkdeploy %.15g (files kept in %s)" % (case, name, want, have, shutil_keep))
                    sys.exit(1)
    print("%d random cases: all twelve COCO numbers and every category's AP agree (largest difference %.3g)" % (cases, worst))


if __name__ == "__main__":
    main()
