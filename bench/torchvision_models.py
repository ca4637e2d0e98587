#!/usr/bin/env python3
"""Script public models from Debian's python3-torchvision for the peer table (`make bench-peer`).

Usage: python bench/torchvision_models.py [--onnx] OUT_DIR BATCH [NAME ...]

Each model is scripted in eval mode with random weights (seed 0; nothing is downloaded; weights
torchvision starts at zero, such as ViT's head, drawn at random too, so that every contender's
error shows) and saved as OUT_DIR/<name>-b<BATCH>.pt with its example inputs, as the samples store
theirs. With --onnx,
the same model (the same weights) is also exported with torch.onnx.export (opset 13) to
OUT_DIR/<name>-b<BATCH>.onnx, for ONNX Runtime; a model that does not export is said on stderr
and has no .onnx.
"""
import json
import os
import sys
import warnings

import torch

# TorchScript is deprecated upstream (2.11 on) and still what these files are written as.
warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", FutureWarning)
import torchvision

# name -> input shape after the batch dimension
MODELS = {
    "resnet18": [3, 224, 224],
    "mobilenet_v3_small": [3, 224, 224],
    "convnext_tiny": [3, 224, 224],
    "efficientnet_b0": [3, 224, 224],
    "shufflenet_v2_x1_0": [3, 224, 224],
    "regnet_y_400mf": [3, 224, 224],
    "swin_t": [3, 224, 224],
    "squeezenet1_1": [3, 224, 224],
    "densenet121": [3, 224, 224],
    "vit_b_16": [3, 224, 224],
    "resnet50": [3, 224, 224],
    "mobilenet_v2": [3, 224, 224],
}


def moving(model: torch.nn.Module) -> None:
    """Weights torchvision initializes to zeros (ViT's classifier head) drawn at random too:
    a model whose outputs are all zeros on every input hides every contender's error."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not bool(p.any()):
                torch.nn.init.normal_(p, std=0.02)


def main() -> int:
    argv = sys.argv[1:]
    onnx = "--onnx" in argv
    argv = [a for a in argv if a != "--onnx"]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, batch = argv[0], int(argv[1])
    names = argv[2:] or sorted(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"torchvision_models.py: error: unknown model {unknown[0]!r} "
              f"(known: {', '.join(sorted(MODELS))})", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)().eval()
        moving(model)
        scripted = torch.jit.script(model)
        spec = {"inputs": [{"name": "x", "shape": [batch] + MODELS[name], "dtype": "float32"}]}
        path = os.path.join(out_dir, f"{name}-b{batch}.pt")
        tmp = path + ".tmp"
        torch.jit.save(scripted, tmp,
                       _extra_files={"xalloc/example_inputs.json": json.dumps(spec, sort_keys=True)})
        os.replace(tmp, path)
        # The eager module too, for torch.compile (bench/python_peers.py --eager).
        torch.save(model, path[:-3] + ".eager.pt")
        if onnx:
            onnx_path = os.path.join(out_dir, f"{name}-b{batch}.onnx")
            try:
                torch.onnx.export(model, torch.randn([batch] + MODELS[name]), onnx_path + ".tmp",
                                  opset_version=13, input_names=["x"], output_names=["y"],
                                  dynamo=False)
                os.replace(onnx_path + ".tmp", onnx_path)
            except Exception as e:  # the exporter's own failure: this model has no ONNX peer
                print(f"torchvision_models.py: {name}: no ONNX export: "
                      f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
