#!/usr/bin/env python3
"""Writes the roofline efficiencies of the papers' Turing and Pascal GPUs from published benchmarks.

Not fitted to any figure `pipetwin reproduce` compares with: each GPU generation's convolution
efficiency is set so that the roofline (profiles/zoo/analytic.hpp) of a *different* model, ResNet-50,
trains at the throughput a published benchmark measured on a GPU of that generation:

  Turing (TU102/TU104: Quadro RTX 5000, RTX 2080 Ti): ResNet-50, float32, batch 64, on an
      RTX 2080 Ti at about 290 images/s;
  Pascal (GP102: Tesla P40, GTX 1080 Ti): the same on a GTX 1080 Ti at about 205 images/s
      (Lambda Labs, "RTX 2080 Ti Deep Learning Benchmarks with TensorFlow", 2019:
      tf_cnn_benchmarks, synthetic data; the figures were recalled without network access,
      re-check them against the post).

The ratio (published / the roofline's prediction with the prior efficiencies) scales the
convolution kinds (conv, residual, cell). No published transformer-training throughput on these
GPUs is cited, so the GEMM kinds keep the built-in prior (profiles/zoo/analytic.hpp). The per-(kind,
pass) overheads are this project's H100 measurements (hardware/efficiency/h100-sxm-float32.json):
host-side dispatch and launch costs, which do not depend on the GPU generation to first order.

Usage: hardware/efficiency/derive_published.py [PIPETWIN]   (default build/pipetwin)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "pipetwin")

PRIOR = {"mlp": 0.65, "linear": 0.6, "head": 0.55, "attention": 0.45, "cross-attention": 0.45,
         "conv": 0.5, "residual": 0.5, "cell": 0.35, "embedding": 0.3, "norm": 0.3}
CONV_KINDS = ("conv", "residual", "cell")
LAMBDA = ("Lambda Labs, 'RTX 2080 Ti Deep Learning Benchmarks with TensorFlow' (2019), "
          "tf_cnn_benchmarks ResNet-50 float32 training, batch 64, synthetic data")
GTX_1080_TI = {"name": "gtx-1080-ti", "kind": "gpu",
               "description": "NVIDIA GeForce GTX 1080 Ti 11 GB (Pascal GP102, the P40's chip)",
               "memory_bytes": 11811160064, "memory_bandwidth": 484e9,
               "peak_flops": {"float32": 2 * 3584 * 1.582e9},
               "source": "NVIDIA GTX 1080 Ti specifications: 3584 CUDA cores, boost 1582 MHz, "
                         "484 GB/s"}

GENERATIONS = [
    {"name": "Turing", "reference": "rtx-2080-ti", "images_per_s": 290.0,
     "published": LAMBDA + ": RTX 2080 Ti about 290 images/s",
     "devices": ["quadro-rtx-5000", "rtx-2080-ti"]},
    {"name": "Pascal", "reference": GTX_1080_TI, "images_per_s": 205.0,
     "published": LAMBDA + ": GTX 1080 Ti about 205 images/s",
     "devices": ["tesla-p40"]},
]


def efficiency(scale, h100):
    compute = {k: v * (scale if k in CONV_KINDS else 1.0) for k, v in PRIOR.items()}
    return {"format": "pipetwin.efficiency", "version": 1, "dtype": "float32",
            "compute": compute, "default_compute": 0.5, "memory": 0.75,
            "overhead_s": h100["overhead_s"], "overheads": h100["overheads"],
            "default_overheads": h100["default_overheads"]}


def throughput(data, device, eff):
    """ResNet-50 images/s on one `device` (catalog name or inline spec) under `eff`."""
    name = device if isinstance(device, str) else device["name"]
    with open(os.path.join(data, "hardware", "efficiency", name + "-float32.json"), "w") as f:
        json.dump(eff, f)
    cluster = {"format": "pipetwin.cluster", "version": 1, "name": "one-" + name,
               "device": device, "nodes": 1, "devices_per_node": 1,
               "intra_node_link": "pcie3-x16"}
    cpath, ppath, mpath = (os.path.join(data, x) for x in ("c.json", "p.json", "m.json"))
    with open(cpath, "w") as f:
        json.dump(cluster, f)
    env = dict(os.environ, PIPETWIN_DATA=data)
    subprocess.run([BIN, "plan", "--model", "resnet:50", "--cluster", cpath, "-K", "1", "-B",
                    "64", "-M", "1", "--optimizer", "sgd", "-o", ppath, "-q"], check=True,
                   env=env)
    subprocess.run([BIN, "simulate", "--plan", ppath, "--metrics", mpath, "-q"], check=True,
                   env=env)
    with open(mpath) as f:
        return json.load(f)["throughput_samples_per_s"]


def solve(data, gen, h100):
    """The conv scale at which the roofline gives the published throughput (bisection)."""
    prior = throughput(data, gen["reference"], efficiency(1.0, h100))
    lo, hi = 0.25, 4.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        (lo, hi) = (mid, hi) if throughput(data, gen["reference"], efficiency(mid, h100)) < \
            gen["images_per_s"] else (lo, mid)
    return prior, (lo * hi) ** 0.5


def main():
    with open(os.path.join(HERE, "h100-sxm-float32.json")) as f:
        h100 = json.load(f)
    data = tempfile.mkdtemp()
    try:
        shutil.copytree(os.path.join(ROOT, "hardware"), os.path.join(data, "hardware"))
        for gen in GENERATIONS:
            prior, scale = solve(data, gen, h100)
            for device in gen["devices"]:
                write(device, gen, prior, scale, h100)
    finally:
        shutil.rmtree(data)


def write(device, gen, prior, scale, h100):
    eff = efficiency(scale, h100)
    conv = (f"{gen['published']}; our roofline of resnet:50 on the reference GPU predicts "
            f"{prior:.1f} images/s with the prior efficiencies and the overheads below, so the "
            f"{gen['name']} convolution kinds get the prior x {scale:.4f} "
            "(hardware/efficiency/derive_published.py)")
    gemm = (f"built-in prior (profiles/zoo/analytic.hpp): no published {gen['name']} "
            "transformer-training throughput is cited")
    eff["notes"] = (f"{gen['name']} ({device}), float32: efficiencies from published benchmarks "
                    "of other models, not fitted to the papers reproduced "
                    "(hardware/efficiency/derive_published.py)")
    eff["sources"] = {k: (conv if k in CONV_KINDS else gemm) for k in PRIOR}
    eff["sources"]["default_compute"] = gemm
    eff["sources"]["memory"] = ("built-in prior 0.75 (profiles/zoo/analytic.hpp): no published "
                                f"{gen['name']} bandwidth benchmark is cited")
    eff["sources"]["overheads"] = (
        "this project's H100 measurements, hardware/efficiency/h100-sxm-float32.json (LibTorch 2.x "
        "on the H100 host): per-(kind, pass) dispatch and launch costs, host-side, so taken as "
        "they are; PyTorch 1.x's Python front end on the papers' hosts costs more, so these are "
        "lower bounds")
    eff["fit"] = {"method": "published ResNet-50 throughput of the generation's reference GPU "
                            "through our roofline", "reference_gpu": gen["reference"] if
                  isinstance(gen["reference"], str) else gen["reference"]["name"],
                  "published_images_per_s": gen["images_per_s"],
                  "prior_images_per_s": prior, "conv_scale": scale}
    with open(os.path.join(HERE, device + "-float32.json"), "w") as f:
        json.dump(eff, f, indent=2)
        f.write("\n")
    print(f"{device}: {gen['name']} conv scale {scale:.4f} (prior {prior:.1f} images/s, "
          f"published {gen['images_per_s']:.0f})")


if __name__ == "__main__":
    main()
