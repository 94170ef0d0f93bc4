#!/usr/bin/env python3
"""How far the PPU's integer average is from the exact mean, for every int8 window sum.

The PPU's average (NVDLA's PDP, whose C model RK3588's PPU follows in the measured cases;
docs/npu.md "Average pooling"): the window sum S (padding cells count as PADDING_VALUE), then
a = rr(rr(S * RW / 2^16) * RH / 2^16), RW = round(2^16 / KW), RH = round(2^16 / KH) (the Q16
reciprocals allbilly/rk3588 measured exact for int8), rr = round half away from zero. The
exact mean is rr(S / (KW KH)) (TFLite's integer AveragePool rounding), computed in integers.
Prints, per kernel, how many of the possible sums of int8 values differ and by how much.
    python3 scripts/docs/ppu_average_bound.py [MAX_KERNEL]
"""
import sys
from fractions import Fraction


def rr(q):  # round half away from zero of a Fraction
    n = abs(q)
    r = int(n + Fraction(1, 2))
    return r if q >= 0 else -r


def ppu(s, kw, kh):
    rw, rh = round(65536 / kw), round(65536 / kh)
    return rr(Fraction(rr(Fraction(s * rw, 65536)) * rh, 65536))


def main():
    kmax = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    print("| kernel | sums | differ | max abs difference |")
    print("|---|---|---|---|")
    worst = 0
    for kh in range(1, kmax + 1):
        for kw in range(kh, kmax + 1):
            k = kw * kh
            sums = range(-128 * k, 127 * k + 1)
            diffs = [ppu(s, kw, kh) - rr(Fraction(s, k)) for s in sums]
            bad = sum(1 for d in diffs if d)
            m = max(abs(d) for d in diffs)
            worst = max(worst, m)
            if kw == kh or kh <= 2:
                print(f"| {kh}x{kw} | {len(sums)} | {bad} ({100.0 * bad / len(sums):.1f} %) | {m} |")
    print(f"\nlargest difference over every kernel up to {kmax}x{kmax} (either order): {worst}")


if __name__ == "__main__":
    main()
