#!/usr/bin/env python3
"""Script torchvision's detection, segmentation and video models as their users call them.

Usage: python bench/family_models.py [--onnx] OUT_DIR [NAME ...]

Each model is built in eval mode from Debian's python3-torchvision with weights whose outputs
depend on the input: every weight re-drawn (seed 0; nothing is downloaded), then each batch
norm's statistics set from what reaches it on a calibration image (a pre-forward hook writes the
mean and variance of its input before the norm runs), so that no layer sits dead and the outputs
the tools compare move with the image. Saved as OUT_DIR/<name>.pt with its example inputs in the
model's extra file (detection models: one image, given as the list of one the model takes;
video 1x3x8x112x112; segmentation 1x3x320x320). With --onnx the same weights are exported with
torch.onnx.export (opset 13) to OUT_DIR/<name>.onnx where the model exports (classification
and segmentation backbones; detection models' control flow does not).
"""
import json
import os
import sys
import warnings

import torch

# TorchScript is deprecated upstream (2.11 on) and still what these files are written as.
warnings.filterwarnings("ignore", r"`torch\.jit\.\w+` is deprecated", FutureWarning)
import torchvision

# name -> (builder, input shape, kind)
MODELS = {
    "r3d_18": ("video.r3d_18", [1, 3, 8, 112, 112], "video"),
    "r2plus1d_18": ("video.r2plus1d_18", [1, 3, 8, 112, 112], "video"),
    "mc3_18": ("video.mc3_18", [1, 3, 8, 112, 112], "video"),
    "s3d": ("video.s3d", [1, 3, 16, 224, 224], "video"),
    "mvit_v1_b": ("video.mvit_v1_b", [1, 3, 16, 224, 224], "video"),
    "deeplabv3_resnet50": ("segmentation.deeplabv3_resnet50", [1, 3, 320, 320], "segmentation"),
    "ssd300_vgg16": ("detection.ssd300_vgg16", [3, 320, 320], "detection"),
    "fcos_resnet50_fpn": ("detection.fcos_resnet50_fpn", [3, 320, 320], "detection"),
    "fcn_resnet50": ("segmentation.fcn_resnet50", [1, 3, 320, 320], "segmentation"),
    "deeplabv3_mobilenet_v3_large": ("segmentation.deeplabv3_mobilenet_v3_large",
                                     [1, 3, 320, 320], "segmentation"),
    "lraspp_mobilenet_v3_large": ("segmentation.lraspp_mobilenet_v3_large", [1, 3, 320, 320],
                                  "segmentation"),
    "ssdlite320_mobilenet_v3_large": ("detection.ssdlite320_mobilenet_v3_large", [3, 320, 320],
                                      "detection"),
    "retinanet_resnet50_fpn": ("detection.retinanet_resnet50_fpn", [3, 320, 320], "detection"),
    "fasterrcnn_mobilenet_v3_large_320_fpn": ("detection.fasterrcnn_mobilenet_v3_large_320_fpn",
                                              [3, 320, 320], "detection"),
    "vgg11_bn": ("vgg11_bn", [1, 3, 224, 224], "classification"),
}

NORMS = (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torchvision.ops.FrozenBatchNorm2d)


def build(name):
    path, shape, kind = MODELS[name]
    fn = torchvision.models
    for part in path.split("."):
        fn = getattr(fn, part)
    kwargs = {"weights": None}
    if kind == "detection":
        kwargs["weights_backbone"] = None
    if kind == "segmentation":
        kwargs["weights_backbone"] = None
        kwargs["aux_loss"] = False
    torch.manual_seed(0)
    model = fn(**kwargs).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                torch.nn.init.normal_(m.weight, std=(2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    torch.nn.init.normal_(m.bias, std=0.1)
            if isinstance(m, NORMS):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(std=0.1)
    calibrate(model, shape, kind)
    if name.startswith("retinanet"):
        # Its classification logits, He-initialized over 256 calibrated channels, saturate the
        # sigmoid (every score 1.0, their order arbitrary): scaled as torchvision scales them
        # (std 0.01 of a unit input, the prior's bias), so the scores spread with the image.
        with torch.no_grad():
            cls = model.head.classification_head.cls_logits
            cls.weight.mul_(0.05)
            cls.bias.fill_(-2.0)
    return model, shape, kind


def calibrate(model, shape, kind):
    """Each norm's running statistics from the input that reaches it, in one forward pass."""
    def hook(m, args):
        x = args[0]
        dims = [d for d in range(x.dim()) if d != 1]
        m.running_mean.copy_(x.mean(dims))
        m.running_var.copy_(x.var(dims, unbiased=False) + 1e-3)
    handles = [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, NORMS)]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        x = torch.rand(shape, generator=g)
        model([x] if kind == "detection" else x)
    for h in handles:
        h.remove()


def main():
    argv = sys.argv[1:]
    onnx = "--onnx" in argv
    argv = [a for a in argv if a != "--onnx"]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, names = argv[0], argv[1:] or sorted(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"family_models.py: error: unknown model {unknown[0]!r} "
              f"(known: {', '.join(sorted(MODELS))})", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        model, shape, kind = build(name)
        scripted = torch.jit.script(model)
        spec = {"inputs": [{"name": "x", "shape": shape, "dtype": "float32", "low": 0, "high": 1}]}
        path = os.path.join(out_dir, f"{name}.pt")
        torch.jit.save(scripted, path + ".tmp",
                       _extra_files={"xalloc/example_inputs.json": json.dumps(spec, sort_keys=True)})
        os.replace(path + ".tmp", path)
        # The eager module too, for torch.compile (bench/python_peers.py --eager).
        torch.save(model, path[:-3] + ".eager.pt")
        if onnx and kind != "detection":
            try:
                torch.onnx.export(model, torch.rand(shape), path[:-3] + ".onnx.tmp",
                                  opset_version=13, input_names=["x"], dynamo=False)
                os.replace(path[:-3] + ".onnx.tmp", path[:-3] + ".onnx")
            except Exception as e:
                print(f"family_models.py: {name}: no ONNX export: "
                      f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
