#!/usr/bin/python3
"""Writes .npy/.npz files with NumPy itself (format versions 1, 2 and 3, savez and
savez_compressed) for tests/core/test_npy.cc: an independent writer to read back."""
import os

import numpy as np
from numpy.lib import format as npformat

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "npy")
os.makedirs(OUT, exist_ok=True)
a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8
for ver in [(1, 0), (2, 0), (3, 0)]:
    with open(os.path.join(OUT, f"f32_v{ver[0]}.npy"), "wb") as f:
        npformat.write_array(f, a, version=ver)
for dt in ["float16", "int8", "uint8", "int16", "int32", "int64", "bool"]:
    np.save(os.path.join(OUT, f"{dt}.npy"), (np.arange(-3, 3) % 2 == 0) if dt == "bool" else np.arange(-3, 3).astype(dt))
np.save(os.path.join(OUT, "scalar.npy"), np.float32(2.5))
np.save(os.path.join(OUT, "big_endian.npy"), np.arange(4, dtype=">f4"))
np.save(os.path.join(OUT, "fortran.npy"), np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save(os.path.join(OUT, "float64.npy"), np.ones(3))
np.savez(os.path.join(OUT, "pair.npz"), a=a, b=np.arange(5, dtype=np.int64))
np.savez_compressed(os.path.join(OUT, "pair_compressed.npz"), a=a, b=np.arange(5, dtype=np.int64))
print("wrote", sorted(os.listdir(OUT)))
