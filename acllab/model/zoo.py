"""The model zoo: ResNet-50 (cost only) and a tiny classifier with real weights and data.

``zoo:resnet50`` is ResNet-50 v1.5 (the stride sits on the 3x3 convolution of each downsampling
bottleneck, as in torchvision): 224x224x3 input, 25,557,032 parameters, about 4.1 GMAC = 8.2
GFLOP per image. Its weights are not materialised: it exists to be compiled and timed. It is an
int8 (quantised) model, because COST_MODEL.md's sanity check shows that 1200 img/s at batch 32
needs about 9.8 TOPS, above the Ascend 310's 8 TFLOPS fp16 peak but within its 16 TOPS int8.
Weights and activations are int8 in device memory (the requantisation that turns each
convolution's int32 accumulators back into int8 is fused into the convolution, as in a model
quantised with AMCT); the input image is fp32 and the output probabilities fp32.

``zoo:tiny`` classifies 1x16x16 grey images of four procedurally drawn patterns
(:data:`TINY_CLASSES`). Its first convolution holds hand-made edge filters, the second is seeded
random, and the classifier is fitted in closed form (ridge regression) on a fixed training set,
so its weights are deterministic and need no training loop or stored file.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .executor import run_graph
from .graph import Graph, GraphError, Op, TensorSpec

__all__ = ["build", "names", "resnet50", "tiny", "tiny_dataset", "tiny_forward", "TINY_CLASSES",
           "TINY_TRAIN_SEED"]

TINY_CLASSES = ("horizontal stripes", "vertical stripes", "diagonal stripes", "blob")
TINY_TRAIN_SEED = 20240
_TINY_WEIGHT_SEED = 7


class _Builder:
    """Appends ops and names their outputs after themselves."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, type_: str, name: str, inputs: list[str], **attrs) -> str:
        self.ops.append(Op(type_, name, list(inputs), [name], attrs))
        return name

    def conv_bn(self, name: str, x: str, cout: int, kernel: int, stride: int = 1,
                relu: bool = True, bn: str | None = None) -> str:
        y = self.add("Conv2D", name, [x], out_channels=cout, kernel=kernel, stride=stride,
                     pad=kernel // 2)
        y = self.add("BatchNorm", bn or name.replace("conv", "bn"), [y])
        return self.add("Relu", name.replace("conv", "relu"), [y]) if relu else y


def resnet50(batch: int = 1, dtype: str = "int8") -> Graph:
    """ResNet-50 v1.5 for 224x224 RGB images (cost only; no weights)."""
    b = _Builder()
    x = b.conv_bn("conv1", "data", 64, 7, 2)
    x = b.add("MaxPool", "pool1", [x], kernel=3, stride=2, pad=1)
    stages = zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True)
    for stage, (blocks, width) in enumerate(stages, start=2):
        for i in range(blocks):
            p = f"res{stage}{chr(ord('a') + i)}"
            stride = 2 if i == 0 and stage > 2 else 1
            y = b.conv_bn(f"{p}_conv1", x, width, 1)
            y = b.conv_bn(f"{p}_conv2", y, width, 3, stride)
            y = b.conv_bn(f"{p}_conv3", y, 4 * width, 1, relu=False)
            if i == 0:
                x = b.conv_bn(f"{p}_down_conv", x, 4 * width, 1, stride, relu=False)
            y = b.add("Add", f"{p}_add", [y, x])
            x = b.add("Relu", f"{p}_relu", [y])
    x = b.add("GlobalAvgPool", "pool5", [x])
    x = b.add("Flatten", "flatten", [x])
    x = b.add("FullyConnected", "fc1000", [x], out_features=1000)
    b.add("Softmax", "prob", [x])
    return Graph("resnet50", [TensorSpec("data", (batch, 3, 224, 224), "fp32", "NCHW")],
                 [TensorSpec("prob", (), "fp32", "ND")], b.ops, dtype=dtype,
                 description="ResNet-50 v1.5, ImageNet, int8-quantised; cost only")


def _tiny_graph() -> Graph:
    b = _Builder()
    x = b.conv_bn("conv1", "data", 8, 3)
    p = b.add("MaxPool", "pool1", [x], kernel=2)
    y = b.conv_bn("conv2", p, 8, 3, relu=False)
    y = b.add("Add", "add2", [y, p])
    y = b.add("Relu", "relu2", [y])
    y = b.add("GlobalAvgPool", "gap", [y])
    y = b.add("Flatten", "feat", [y])
    y = b.add("FullyConnected", "fc", [y], out_features=len(TINY_CLASSES))
    b.add("Softmax", "prob", [y])
    return Graph("tiny", [TensorSpec("data", (1, 1, 16, 16), "fp32", "NCHW")],
                 [TensorSpec("prob", (), "fp32", "ND")], b.ops, dtype="fp16",
                 weight_dtype="fp32",
                 description="4-class pattern classifier on 1x16x16 images; real weights")


def _edge_filters() -> np.ndarray:
    sobel_h = np.array([[1, 2, 1], [0, 0, 0], [-1, -2, -1]], np.float32)
    diag = np.array([[2, 1, 0], [1, 0, -1], [0, -1, -2]], np.float32)
    filters = [sobel_h, -sobel_h, sobel_h.T, -sobel_h.T, diag, -diag, diag[:, ::-1],
               np.full((3, 3), 1.0, np.float32)]
    return (np.stack(filters)[:, None] / 4.0).astype(np.float32)


@lru_cache(maxsize=1)
def _tiny_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(_TINY_WEIGHT_SEED)
    w = {"conv1.weight": _edge_filters()}
    for bn in ("bn1", "bn2"):
        w[f"{bn}.scale"] = rng.uniform(0.8, 1.2, 8).astype(np.float32)
        w[f"{bn}.bias"] = rng.uniform(-0.05, 0.05, 8).astype(np.float32)
        w[f"{bn}.mean"] = rng.uniform(-0.05, 0.05, 8).astype(np.float32)
        w[f"{bn}.var"] = rng.uniform(0.8, 1.2, 8).astype(np.float32)
    w["conv2.weight"] = (rng.standard_normal((8, 8, 3, 3)) * 0.05).astype(np.float32)
    graph = _tiny_graph()
    n = len(TINY_CLASSES)
    w["fc.weight"] = np.zeros((n, 8), np.float32)
    w["fc.bias"] = np.zeros(n, np.float32)
    images, labels = tiny_dataset(2000, TINY_TRAIN_SEED)
    feats = run_graph(graph, {"data": images}, w, want=["feat"])["feat"].astype(np.float64)
    mu, sd = feats.mean(axis=0), feats.std(axis=0) + 1e-6
    z = np.hstack([(feats - mu) / sd, np.ones((len(feats), 1))])
    target = np.eye(n)[labels] * 8.0 - 4.0          # +4 for the class, -4 otherwise
    coef = np.linalg.solve(z.T @ z + 1e-2 * np.eye(z.shape[1]), z.T @ target)
    w["fc.weight"] = (coef[:-1] / sd[:, None]).T.astype(np.float32)
    w["fc.bias"] = (coef[-1] - (mu / sd) @ coef[:-1]).astype(np.float32)
    return w


def tiny() -> Graph:
    """The tiny 4-class classifier with its deterministic weights."""
    graph = _tiny_graph()
    graph.weights = {k: v.copy() for k, v in _tiny_weights().items()}
    return graph


def tiny_dataset(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy 1x16x16 pattern images (float32, NCHW) and their labels (int64), by seed."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % len(TINY_CLASSES)).astype(np.int64)
    yy, xx = np.mgrid[0:16, 0:16].astype(np.float64)
    images = np.empty((n, 1, 16, 16), np.float32)
    for i, label in enumerate(labels):
        amp = rng.uniform(0.6, 1.0)
        if label == 3:
            cy, cx = rng.uniform(4, 12, 2)
            r = rng.uniform(2.5, 5.0)
            img = amp * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
        else:
            period, phase = rng.uniform(3.5, 6.0), rng.uniform(0, 2 * np.pi)
            coord = (yy, xx, (xx + yy) if rng.random() < 0.5 else (xx - yy))[label]
            if label == 2:
                coord = coord / np.sqrt(2.0)
            img = amp * 0.5 * (1 + np.sin(2 * np.pi * coord / period + phase))
        images[i, 0] = img + rng.normal(0.0, 0.15, (16, 16))
    return images, labels


def tiny_forward(images: np.ndarray) -> np.ndarray:
    """Class probabilities (N, 4) of the tiny model on NCHW images, in numpy (the reference)."""
    graph = tiny()
    return run_graph(graph, {"data": np.asarray(images, np.float32)})["prob"]


_BUILDERS = {"resnet50": resnet50, "tiny": tiny}


def names() -> list[str]:
    """The names of the built-in models (use them as 'zoo:NAME')."""
    return sorted(_BUILDERS)


def build(name: str) -> Graph:
    """The built-in model called ``name``; GraphError if there is none."""
    try:
        return _BUILDERS[name]()
    except KeyError:
        raise GraphError(f"no built-in model {name!r}; choose one of {names()}") from None
