"""The runtime's kernels at each CPU level of their dispatch table (runtime/kernels/dispatch.h),
each level in a fresh process (XALLOC_CPU_ISA caps the table once per process): ShuffleNetV2's
two-group shuffle as xalloc::channel_shuffle against ATen's aten::channel_shuffle on the same
channels-last input, batch 1, one thread, median of 7 rounds of 500 calls.

    /usr/bin/python3 bench/cpu_levels.py [--build build]
"""
import argparse
import os
import subprocess
import sys
import time

SHAPES = [(116, 28), (232, 14), (464, 7)]  # ShuffleNetV2 x1.0's three stages


def child():
    import torch
    import xalloc

    xalloc.load_ops()
    torch.set_num_threads(1)
    out = []
    for c, hw in SHAPES:
        x = torch.randn(1, c, hw, hw).contiguous(memory_format=torch.channels_last)
        ours = lambda: torch.ops.xalloc.channel_shuffle(x, 2)
        aten = lambda: torch.channel_shuffle(x, 2)
        assert torch.equal(ours(), aten()), "the shuffle differs from ATen's"

        def median_us(f):
            for _ in range(200):
                f()
            rounds = []
            for _ in range(7):
                start = time.perf_counter()
                for _ in range(500):
                    f()
                rounds.append((time.perf_counter() - start) / 500 * 1e6)
            return sorted(rounds)[3]

        a, o = median_us(aten), median_us(ours)
        out.append(f"c={c} {hw}x{hw}: ATen {a:.2f} us, ours {o:.2f} us ({a / o:.2f}x)")
    print("; ".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"))
    for level in ("avx512f", "avx2", "baseline"):
        env["XALLOC_CPU_ISA"] = level
        r = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True,
                           text=True)
        print(f"{level:>8}: " + (r.stdout.strip() or r.stderr.strip().splitlines()[-1]))


if __name__ == "__main__":
    child() if sys.argv[1:] == ["--child"] else main()
