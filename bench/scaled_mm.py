#!/usr/bin/env python3
"""scaled_mm.py: TFLOP/s of torch._scaled_mm on the shape bench_gemm measures (the baseline of
fp8lab's cuBLASLt FP8 GEMM; scripts/device-check.sh prints the ratio).

Y[M,N] = A[M,K] . B[N,K]^T with A, B standard normal values cast to float8_e4m3fn, per-tensor
scales 1.0, BF16 output, use_fast_accum=True: the same problem as bench_gemm's first line
(cuBLASLt "TN", E4M3 x E4M3 -> BF16, fast accumulation). CUDA events around `iters` calls after
`warmup`. Usage: scaled_mm.py [M N K [iters]]. Last line "RESULT fprop_tflops=<value>".
Exit 77 when torch or a CUDA device is missing.
"""
import sys


def main() -> int:
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no baseline"
        print(f"skipped: torch not importable ({e})")
        return 77
    if not torch.cuda.is_available():
        print("skipped: torch sees no CUDA device")
        return 77
    args = [int(a) for a in sys.argv[1:]]
    m, n, k = args[:3] if len(args) >= 3 else (8192, 8192, 8192)
    iters = args[3] if len(args) >= 4 else 50
    warmup = 10
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(m, k, device=dev, generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev, generator=gen).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device=dev)

    def run():
        # b.t() is column-major [K, N]: the "TN" layout cuBLASLt needs, no copy.
        return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                use_fast_accum=True)

    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        run()
    end.record()
    torch.cuda.synchronize()
    t = start.elapsed_time(end) / 1e3 / iters
    tflops = 2.0 * m * n * k / t / 1e12
    print(f"scaled_mm: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"M={m} N={n} K={k}, {iters} iterations after {warmup} warm-up")
    print(f"  torch._scaled_mm e4m3 x e4m3 -> bf16, fast accum  {t * 1e3:8.3f} ms  "
          f"{tflops:7.1f} TFLOP/s")
    print(f"RESULT fprop_tflops={tflops:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
