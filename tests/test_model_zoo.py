"""acllab.model.zoo: ResNet-50's size and work, and the tiny model's real accuracy."""

import numpy as np
import pytest

from acllab.model import zoo
from acllab.model.graph import GraphError
from acllab.model.source import load_graph


@pytest.fixture(scope="module")
def resnet():
    g = zoo.resnet50()
    return g, g.annotate({"data": (1, 3, 224, 224)})


def test_resnet50_is_about_8_2_gflop_per_image(resnet):
    _, ann = resnet
    gemm_flops = sum(c.flops for c in ann.costs if c.unit == "cube")
    print(f"\nResNet-50 v1.5: {gemm_flops / 2e9:.3f} GMAC = {gemm_flops / 1e9:.3f} GFLOP/image")
    assert abs(gemm_flops / 8.2e9 - 1) < 0.02
    # conv1: 112x112 outputs x 64 filters x 7x7x3 MACs
    conv1 = ann.costs[0]
    assert conv1.flops == 2 * 112 * 112 * 64 * 7 * 7 * 3


def test_resnet50_has_25_6_million_parameters(resnet):
    g, ann = resnet
    assert g.param_count() == 25_557_032            # torchvision's resnet50, exactly
    weights = sum(c.weight_bytes for c in ann.costs)
    assert 25.5e6 < weights < 26.5e6                # int8 weights plus fp32 BN constants
    assert not g.weights                            # cost only: nothing materialised
    assert g.dtype == "int8" and g.inputs[0].dtype == "fp32"


def test_resnet50_structure(resnet):
    g, ann = resnet
    assert sum(op.type == "Conv2D" for op in g.ops) == 53
    assert sum(op.type == "Add" for op in g.ops) == 16
    assert ann.shapes["res5c_relu"] == (1, 2048, 7, 7)
    assert ann.shapes["prob"] == (1, 1000)
    # v1.5: the stride sits on the 3x3 convolution
    assert next(o for o in g.ops if o.name == "res3a_conv2").attrs["stride"] == 2
    assert next(o for o in g.ops if o.name == "res3a_conv1").attrs["stride"] == 1


def test_tiny_dataset_is_deterministic_and_balanced():
    a, la = zoo.tiny_dataset(40, seed=5)
    b, lb = zoo.tiny_dataset(40, seed=5)
    c, _ = zoo.tiny_dataset(40, seed=6)
    assert a.shape == (40, 1, 16, 16) and a.dtype == np.float32 and la.dtype == np.int64
    assert np.array_equal(a, b) and np.array_equal(la, lb) and not np.array_equal(a, c)
    assert np.bincount(la, minlength=4).tolist() == [10, 10, 10, 10]
    assert zoo.tiny_dataset(0)[0].shape == (0, 1, 16, 16)


def test_tiny_model_classifies_its_dataset():
    images, labels = zoo.tiny_dataset(1000, seed=2024)        # not the training seed
    probs = zoo.tiny_forward(images)
    accuracy = float((probs.argmax(axis=1) == labels).mean())
    print(f"\ntiny model accuracy on 1000 held-out images: {accuracy:.1%}")
    assert accuracy >= 0.90
    assert probs.shape == (1000, 4) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    for k in range(len(zoo.TINY_CLASSES)):                    # every class is learnt
        assert (probs.argmax(axis=1)[labels == k] == k).mean() > 0.8


def test_tiny_weights_are_deterministic_copies():
    a, b = zoo.tiny(), zoo.tiny()
    assert sorted(a.weights) == sorted(b.weights)
    assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)
    a.weights["fc.weight"][:] = 0                             # a copy: the zoo is unharmed
    assert np.any(zoo.tiny().weights["fc.weight"])


def test_zoo_names_and_lookup():
    assert zoo.names() == ["resnet50", "tiny"]
    assert load_graph("zoo:tiny").name == "tiny"
    with pytest.raises(GraphError):
        zoo.build("vgg")
