#!/usr/bin/python3
"""Writes the op-parameter files (format pipetwin.op_params v1, profiles/zoo/op_params.hpp) of the
catalog's GPUs, none of which is at hand: every number is a datasheet figure, a ratio of datasheet
figures to the H100 SXM's, or a stated assumption. A GPU measured with
`pipetwin calibrate --microbench --torch-device cuda` replaces its file.

Run from the repository root: /usr/bin/python3 hardware/ops/derive_ops.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (SMs, {dtype: dense peak FLOP/s}, memory bandwidth B/s, tensor-core generation, datasheet)
# Peaks and bandwidths are the catalog's (hardware/devices.json); SM counts from the whitepapers.
GPUS = {
    "h100-sxm": (132, {"float32": 67.0e12, "tfloat32": 494.7e12, "float16": 989.5e12,
                       "bfloat16": 989.5e12}, 3.35e12, "hopper",
                 "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 132 SMs, 3.35 TB/s HBM3) and the "
                 "NVIDIA H100 architecture whitepaper"),
    "h200-sxm": (132, {"float32": 67.0e12, "tfloat32": 494.7e12, "float16": 989.5e12,
                       "bfloat16": 989.5e12}, 4.8e12, "hopper",
                 "NVIDIA H200 Tensor Core GPU datasheet (SXM: the H100's 132-SM GH100 with "
                 "4.8 TB/s HBM3e)"),
    "a100-40gb": (108, {"float32": 19.5e12, "tfloat32": 156e12, "float16": 312e12,
                        "bfloat16": 312e12}, 1.555e12, "ampere",
                  "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40 GB: 108 SMs, 1,555 GB/s)"),
    "a100-80gb": (108, {"float32": 19.5e12, "tfloat32": 156e12, "float16": 312e12,
                        "bfloat16": 312e12}, 2.039e12, "ampere",
                  "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB: 108 SMs, 2,039 GB/s)"),
    "v100-16gb": (80, {"float32": 15.7e12, "float16": 125e12}, 0.9e12, "volta",
                  "NVIDIA Tesla V100 datasheet (SXM2: 80 SMs, 900 GB/s)"),
    "v100-32gb": (80, {"float32": 15.7e12, "float16": 125e12}, 0.9e12, "volta",
                  "NVIDIA Tesla V100 datasheet (SXM2: 80 SMs, 900 GB/s)"),
    "v100-pcie-16gb": (80, {"float32": 14.0e12, "float16": 112e12}, 0.9e12, "volta",
                       "NVIDIA Tesla V100 datasheet (PCIe: 80 SMs, 900 GB/s)"),
    "tesla-p40": (30, {"float32": 11.76e12}, 0.346e12, "pascal",
                  "NVIDIA Tesla P40 datasheet (30 SMs, 346 GB/s; no tensor cores)"),
    "rtx-2080-ti": (68, {"float32": 13.4e12, "float16": 53.8e12}, 0.616e12, "turing",
                    "NVIDIA Turing architecture whitepaper (RTX 2080 Ti: 68 SMs, 616 GB/s)"),
    "quadro-rtx-5000": (48, {"float32": 11.2e12, "float16": 89.2e12}, 0.448e12, "turing",
                        "NVIDIA Quadro RTX 5000 datasheet (48 SMs, 448 GB/s)"),
    "l4": (58, {"float32": 30.3e12, "float16": 121e12, "bfloat16": 121e12}, 0.3e12, "ada",
           "NVIDIA L4 datasheet (58 SMs, 300 GB/s)"),
    "rtx-4090": (128, {"float32": 82.6e12, "float16": 165.2e12, "bfloat16": 165.2e12}, 1.008e12,
                 "ada", "NVIDIA Ada architecture whitepaper (RTX 4090: 128 SMs, 1,008 GB/s)"),
}

REFERENCE = "h100-sxm"
TENSOR = {"float16", "bfloat16", "tfloat32"}

# Assumptions, each said once here and quoted in every file.
GEMM_FRACTION = {
    True: (0.8, "assumption: large cuBLAS GEMMs on tensor cores reach about 80% of the dense "
                "peak (published Ampere and Hopper GEMM benchmarks reach 70-85%)"),
    False: (0.85, "assumption: large cuBLAS SGEMMs on the CUDA cores reach about 85% of the "
                  "FP32 peak"),
}
BANDWIDTH_FRACTION = (0.9, "assumption: copies reach about 90% of the datasheet bandwidth "
                           "(STREAM-like kernels reach 85-93% on HBM)")
TILE_K = (64.0, "assumption: a tile's prologue and epilogue cost about two 32-deep k-blocks")


def tile(gen, dtype):
    """(tile_m, tile_n, source): CUTLASS's default threadblock tiles per architecture."""
    if dtype in TENSOR and gen in ("hopper", "ampere", "ada"):
        return 128, 256, ("CUTLASS default threadblock tile for 16-bit tensor-core GEMMs on "
                          "SM80/SM90 (128 x 256 x 64)")
    if dtype in TENSOR:
        return 128, 128, "CUTLASS default threadblock tile for Volta/Turing tensor-core GEMMs"
    return 128, 128, "CUTLASS default threadblock tile for SIMT SGEMM (128 x 128 x 8)"


def attention(gen):
    if gen in ("hopper", "ampere", "ada"):
        return (0.5, 0.4, "assumption: PyTorch's scaled_dot_product_attention runs "
                          "FlashAttention-2, which reaches 50-73% of the peak forward and less "
                          "backward on the A100 (Dao 2023); the low end taken")
    return (0.35, 0.3, "assumption: before SM80 PyTorch's fused attention is the "
                       "memory-efficient kernel, slower than FlashAttention-2 (Dao 2023 compares "
                       "them): 35% / 30% of the GEMM rate")


def src(value, text):
    return {"value": value, "source": text}


def gpu_file(name):
    sms, peaks, bw, gen, sheet = GPUS[name]
    derived = name != REFERENCE
    ratio = ("" if not derived else
             f" (derived: this GPU is not at hand; the H100 SXM's assumptions applied to its "
             f"datasheet, {sheet})")
    gemm = {}
    for dtype, peak in peaks.items():
        frac, why = GEMM_FRACTION[dtype in TENSOR]
        tm, tn, tile_src = tile(gen, dtype)
        gemm[dtype] = {
            "tile_m": src(tm, tile_src),
            "tile_n": src(tn, tile_src),
            "unit_flops": src(peak / sms * frac,
                              f"{dtype} dense peak {peak / 1e12:g} TFLOP/s / {sms} SMs x {frac} "
                              f"({sheet}; {why})"),
            "tile_k_overhead": src(*TILE_K),
        }
    fwd, bwd, attn_src = attention(gen)
    frac, frac_src = BANDWIDTH_FRACTION
    doc = {
        "format": "pipetwin.op_params",
        "version": 1,
        "device": name,
        "derivation": "derived" if derived else "datasheet",
        "notes": ("datasheet figures and stated assumptions" + ratio +
                  "; written by hardware/ops/derive_ops.py"),
        "units": src(sms, sheet),
        "async": src(True, "a GPU: kernels are queued behind the host (CUDA streams)"),
        "launch_s": src(2e-6, "assumption: about 2 us of device time between back-to-back "
                              "kernels (launch latency and the tail of the previous grid)"),
        "host_s": src(6e-6, "assumption: LibTorch's C++ dispatch, allocation and "
                            "cudaLaunchKernel cost about 6 us of host time per operator"),
        "host_node_s": src(4e-6, "assumption: the autograd engine's bookkeeping is about 4 us "
                                 "per node"),
        "host_tensor_s": src(0.0, "multi-tensor (foreach) optimizer kernels: no per-tensor "
                                  "launch"),
        "bandwidth": src(bw * frac, f"{bw / 1e12:g} TB/s x {frac} ({sheet}; {frac_src})"),
        "cache_bytes": src(0.0, "L2 reuse between kernels is not modelled"),
        "cache_bandwidth": src(bw * frac, "unused (cache_bytes 0): the memory bandwidth"),
        "fused_attention": src(True, "LibTorch 2.x: models/layers.cpp calls "
                                     "scaled_dot_product_attention on a GPU"),
        "attention_efficiency": {"forward": src(fwd, attn_src), "backward": src(bwd, attn_src)},
        "gemm": gemm,
        "conv": {
            "efficiency": {
                "forward": src(0.85, "assumption: cuDNN's implicit-GEMM convolutions run at "
                                     "about 85% of the GEMM rate"),
                "dgrad": src(0.8, "assumption: the data gradient at about 80% of the GEMM rate"),
                "wgrad": src(0.75, "assumption: the weight gradient (a K = b h w reduction) at "
                                   "about 75% of the GEMM rate"),
            },
            "winograd_dtypes": src(["float32"],
                                   "cuDNN offers Winograd F(2x2,3x3) (Lavin and Gray 2016) for "
                                   "3x3 stride-1 convolutions on the CUDA cores; on tensor cores "
                                   "its implicit GEMM is faster"),
            "fixed_s": src(0.0, "assumption: a cuDNN call costs no more than its kernel's "
                                "launch (launch_s)"),
        },
    }
    return doc


def main():
    for name in GPUS:
        path = os.path.join(HERE, name + ".json")
        text = json.dumps(gpu_file(name), indent=2) + "\n"
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        print("wrote", path)


if __name__ == "__main__":
    main()
