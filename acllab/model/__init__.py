"""The offline-model side: graphs, the model zoo, an atc-like compiler, .om files, and costs.

    from acllab.model import compile_model, save, load, execute_ns
    m = compile_model("zoo:resnet50", input_shape="data:-1,3,224,224",
                      dynamic_batch_size="1,2,4,8,16,32", soc_version="Ascend310")
    m.report()                      # what atc decided: fusion, tiling, memory, gears
    save(m, "resnet50_dyn.om")
    execute_ns(load("resnet50_dyn.om"), batch=32)

Numpy and the standard library only.
"""

from __future__ import annotations

from .atc import AtcError, atc_main, compile_model
from .compiled import DYNAMIC_INPUT_NAME, CompiledModel, MemoryPlan, TensorDesc
from .cost import OpTime, breakdown, execute_ns
from .graph import Graph, GraphError, Op, TensorSpec
from .omfile import ModelFileError, dumps, load, loads, query_size, save
from .source import load_graph
from .zoo import TINY_CLASSES, tiny_dataset, tiny_forward

__all__ = [
    "AtcError", "atc_main", "compile_model", "CompiledModel", "TensorDesc", "MemoryPlan",
    "DYNAMIC_INPUT_NAME", "OpTime", "breakdown", "execute_ns", "Graph", "GraphError", "Op",
    "TensorSpec", "load_graph", "ModelFileError", "dumps", "loads", "save", "load",
    "query_size", "TINY_CLASSES", "tiny_dataset", "tiny_forward",
]
