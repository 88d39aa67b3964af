#!/usr/bin/python3
"""make_expect.py: builds small ONNX graphs with onnx.helper, runs onnx's shape inference
(data_prop=True, strict mode) on each, and writes tests/ops/expect_shapes.txt: the graph description
(for the C test to rebuild with the IR API) followed by the shapes onnx inferred. The reference is
onnx, not gopt. Run from anywhere: /usr/bin/python3 tests/ops/make_expect.py

Fixture format, one directive per line:
  case NAME OPSET                      start of a graph
  input NAME DTYPE RANK DIMS...        graph input; a dim is an int or a symbol name
  weight NAME DTYPE RANK DIMS...       initializer whose values do not matter (no data in C)
  init NAME DTYPE RANK DIMS... N VALS  initializer with values
  node TYPE NAME NIN INS... NOUT OUTS  ('-' is an omitted input)
  attr KEY i V | f V | s STR | ints N V... | floats N V... | tensor DTYPE N V...
                                       attribute of the last node (tensor: 1-D)
  fold                                 run gopt with fold_constants
  expect NAME DTYPE RANK DIMS...       onnx's result: int, '$sym' (a named input symbol) or '?'
                                       (unknown); RANK -1 means onnx could not tell
  error NODE                           onnx rejects the graph; gopt must fail naming NODE
  want NAME RANK DIMS...               an independent reference (numpy) where onnx cannot tell
  check KIND ARG                       gopt-specific assertion (removed NODE / const TENSOR / alive NODE
                                       / sym TENSOR DIM NAME)
  end
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

F, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
NP = {F: np.float32, I64: np.int64, I32: np.int32, B: np.bool_}
BIG = 9223372036854775807


class Case:
    def __init__(self, name, opset=13, fold=False):
        self.name, self.opset, self.fold = name, opset, fold
        self.inputs, self.inits, self.nodes, self.lines = [], [], [], []
        self.error_node = None
        self.checks = []
        self.syms = set()
        CASES.append(self)

    def input(self, name, dt, dims):
        self.inputs.append(helper.make_tensor_value_info(name, dt, dims))
        self.syms.update(d for d in dims if isinstance(d, str))
        self.lines.append("input %s %d %d %s" % (name, dt, len(dims), " ".join(map(str, dims))))
        return self

    def weight(self, name, dt, dims):
        self.inits.append(helper.make_tensor(name, dt, dims, np.zeros(dims, NP[dt]).flatten().tolist()))
        self.lines.append("weight %s %d %d %s" % (name, dt, len(dims), " ".join(map(str, dims))))
        return self

    def init(self, name, dt, dims, vals):
        arr = np.array(vals, NP[dt]).reshape(dims)
        self.inits.append(numpy_helper.from_array(arr, name))
        self.lines.append("init %s %d %d %s %d %s" % (name, dt, len(dims), " ".join(map(str, dims)),
                                                     arr.size, " ".join(repr(v) for v in arr.flatten().tolist())))
        return self

    def node(self, op, ins, outs, name=None, **attrs):
        name = name or "%s_%d" % (op.lower(), len(self.nodes))
        self.nodes.append(helper.make_node(op, [i if i != "-" else "" for i in ins], outs, name=name, **attrs))
        self.lines.append("node %s %s %d %s %d %s" % (op, name, len(ins), " ".join(ins), len(outs), " ".join(outs)))
        for k, v in attrs.items():
            if isinstance(v, onnx.TensorProto):
                arr = numpy_helper.to_array(v).flatten()
                self.lines.append("attr %s tensor %d %d %s" % (k, v.data_type, arr.size, " ".join(repr(x) for x in arr.tolist())))
            elif isinstance(v, bool) or isinstance(v, int):
                self.lines.append("attr %s i %d" % (k, v))
            elif isinstance(v, float):
                self.lines.append("attr %s f %r" % (k, v))
            elif isinstance(v, str):
                self.lines.append("attr %s s %s" % (k, v))
            elif all(isinstance(x, int) for x in v):
                self.lines.append("attr %s ints %d %s" % (k, len(v), " ".join(map(str, v))))
            else:
                self.lines.append("attr %s floats %d %s" % (k, len(v), " ".join(repr(float(x)) for x in v)))
        return self

    def error(self, node, onnx_detects=True):
        """The graph is inconsistent; onnx_detects=False where onnx 1.12's inference does not check
        (the inconsistency is then plain arithmetic stated in the case)."""
        self.error_node, self.onnx_detects = node, onnx_detects
        return self

    def want(self, name, dims):
        """A second, independent reference (numpy evaluated on zeros, or a named symbol '$x') for
        shapes onnx 1.12's inference leaves unknown."""
        self.checks.append("WANT %s %d %s" % (name, len(dims), " ".join(map(str, dims))))
        return self

    def check(self, *args):
        self.checks.append(" ".join(map(str, args)))
        return self

    def emit(self, out):
        outs = [o for n in self.nodes for o in n.output if o]
        graph = helper.make_graph(self.nodes, self.name, self.inputs,
                                  [helper.make_empty_tensor_value_info(o) for o in outs[-1:]],
                                  initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        out.append("case %s %d" % (self.name, self.opset))
        out.extend(self.lines)
        if self.fold:
            out.append("fold")
        try:
            inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
            failed = None
        except Exception as e:  # onnx.shape_inference.InferenceError
            failed = str(e).splitlines()[0]
        if self.error_node:
            if not failed and self.onnx_detects:
                sys.exit("%s: onnx accepted a graph expected to fail" % self.name)
            out.append("error %s" % self.error_node)
        else:
            if failed:
                sys.exit("%s: onnx failed: %s" % (self.name, failed))
            vis = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
            for o in outs:
                v = vis.get(o)
                if v is None or not v.type.tensor_type.HasField("shape"):
                    dt = v.type.tensor_type.elem_type if v is not None else 0
                    out.append("expect %s %d -1" % (o, dt))
                    continue
                dims = []
                for d in v.type.tensor_type.shape.dim:
                    if d.HasField("dim_value"):
                        dims.append(str(d.dim_value))
                    elif d.HasField("dim_param") and d.dim_param in self.syms:
                        dims.append("$" + d.dim_param)
                    else:
                        dims.append("?")
                out.append(("expect %s %d %d %s" % (o, v.type.tensor_type.elem_type, len(dims), " ".join(dims))).rstrip())
        for c in self.checks:
            out.append(("want " + c[5:]) if c.startswith("WANT ") else ("check " + c))
        out.append("end")


CASES = []

# ---- conv / pool -------------------------------------------------------------------------------
(Case("conv_pads_strides").input("X", F, [1, 3, 32, 32]).weight("W", F, [8, 3, 3, 3]).weight("B", F, [8])
 .node("Conv", ["X", "W", "B"], ["Y"], strides=[2, 2], pads=[1, 1, 1, 1]))
(Case("conv_same_upper").input("X", F, [1, 3, 17, 17]).weight("W", F, [4, 3, 4, 4])
 .node("Conv", ["X", "W"], ["Y"], strides=[2, 2], auto_pad="SAME_UPPER"))
(Case("conv_same_lower_group_dil").input("X", F, [2, 4, 15, 15]).weight("W", F, [6, 2, 3, 3])
 .node("Conv", ["X", "W"], ["Y"], group=2, dilations=[2, 2], auto_pad="SAME_LOWER"))
(Case("conv_valid").input("X", F, [1, 3, 10, 11]).weight("W", F, [2, 3, 3, 2])
 .node("Conv", ["X", "W"], ["Y"], strides=[3, 2], auto_pad="VALID"))
(Case("conv1d_dilated", 11).input("X", F, ["N", 16, 100]).weight("W", F, [16, 16, 2])
 .node("Conv", ["X", "W"], ["Y"], dilations=[4])
 .node("Conv", ["Y", "W"], ["Z"], dilations=[8], pads=[8, 0]))
(Case("conv_asym_pads_kernel_attr").input("X", F, ["batch", 3, 224, 224]).weight("W", F, [64, 3, 7, 7])
 .node("Conv", ["X", "W"], ["Y"], kernel_shape=[7, 7], strides=[2, 2], pads=[3, 2, 3, 2])
 .node("Relu", ["Y"], ["R"])
 .node("MaxPool", ["R"], ["P"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
(Case("conv_symbolic_spatial").input("X", F, [1, 3, "H", "W"]).weight("W", F, [8, 3, 3, 3])
 .node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1]))
(Case("maxpool_ceil").input("X", F, [1, 16, 56, 56])
 .node("MaxPool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
 .node("MaxPool", ["X"], ["Z"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=0))
(Case("maxpool_dil_indices", 12).input("X", F, [1, 4, 20, 20])
 .node("MaxPool", ["X"], ["Y", "I"], kernel_shape=[3, 3], dilations=[2, 2]))
(Case("avgpool_same_upper").input("X", F, [1, 8, 7, 7])
 .node("AveragePool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
 .node("AveragePool", ["X"], ["Z"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, count_include_pad=0))
(Case("global_pool").input("X", F, ["N", 512, 7, 7]).node("GlobalAveragePool", ["X"], ["Y"])
 .node("Flatten", ["Y"], ["Z"]).node("GlobalMaxPool", ["X"], ["M"]))
(Case("conv_transpose").input("X", F, [1, 8, 10, 10]).weight("W", F, [8, 4, 3, 3])
 .node("ConvTranspose", ["X", "W"], ["Y"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
 .node("ConvTranspose", ["X", "W"], ["Z"], group=2, strides=[2, 2])
 .node("ConvTranspose", ["X", "W"], ["U"], strides=[2, 2], output_shape=[21, 21]))
(Case("conv_transpose_same").input("X", F, [1, 8, 10, 10]).weight("W", F, [8, 4, 4, 4])
 .node("ConvTranspose", ["X", "W"], ["Y"], strides=[2, 2], auto_pad="SAME_UPPER"))

# ---- matmul / gemm / einsum -------------------------------------------------------------------------
(Case("matmul_broadcast").input("A", F, [2, 1, 3, 4]).input("B", F, [5, 4, 6]).input("v", F, [4])
 .input("M", F, [3, 4]).node("MatMul", ["A", "B"], ["Y"]).node("MatMul", ["v", "B"], ["Y1"])
 .node("MatMul", ["M", "v"], ["Y2"]).node("MatMul", ["v", "v"], ["Y3"]))
(Case("matmul_symbolic").input("A", F, ["batch", "seq", 768]).weight("W", F, [768, 3072])
 .node("MatMul", ["A", "W"], ["Y"]))
(Case("gemm_trans").input("A", F, [4, 3]).weight("B", F, [5, 4]).weight("C", F, [5])
 .node("Gemm", ["A", "B", "C"], ["Y"], transA=1, transB=1)
 .weight("B2", F, [3, 6]).node("Gemm", ["Y", "B2"], ["Z"], transA=1))
EA, EB, EQ, EK = (np.zeros(s) for s in ([2, 3, 4], [2, 4, 5], [2, 8, 7, 16], [2, 8, 9, 16]))
(Case("einsum", 12).input("A", F, [2, 3, 4]).input("B", F, [2, 4, 5]).input("Q", F, [2, 8, 7, 16])
 .input("K", F, [2, 8, 9, 16])
 .node("Einsum", ["A", "B"], ["Y"], equation="bij,bjk->bik")
 .node("Einsum", ["Q", "K"], ["S"], equation="bhqd,bhkd->bhqk")
 .node("Einsum", ["A"], ["T"], equation="ij...->...ji")
 .node("Einsum", ["A", "B"], ["I"], equation="bij,bjk")
 .want("Y", np.einsum("bij,bjk->bik", EA, EB).shape).want("S", np.einsum("bhqd,bhkd->bhqk", EQ, EK).shape)
 .want("T", np.einsum("ij...->...ji", EA).shape).want("I", np.einsum("bij,bjk", EA, EB).shape))

# ---- reshape & shape computations --------------------------------------------------------------------
(Case("reshape_zero_neg").input("X", F, [2, 3, 4]).init("s1", I64, [2], [0, -1]).init("s2", I64, [2], [-1, 4])
 .init("s3", I64, [4], [1, 0, 2, -1])
 .node("Reshape", ["X", "s1"], ["Y1"]).node("Reshape", ["X", "s2"], ["Y2"]).node("Reshape", ["X", "s3"], ["Y3"]))
(Case("reshape_allowzero", 14).input("X", F, [0, 3]).init("s", I64, [2], [0, 3])
 .node("Reshape", ["X", "s"], ["Y"], allowzero=1))
(Case("reshape_symbolic_zero").input("X", F, ["batch", "seq", 768]).init("s", I64, [4], [0, 0, 12, 64])
 .node("Reshape", ["X", "s"], ["Y"]))


def view_chain(name, batch, fold):
    c = Case(name, 13, fold).input("X", F, [batch, 512, 2, 2])
    c.init("i0", I64, [], [0]).init("ax0", I64, [1], [0]).init("m1", I64, [1], [-1])
    c.node("Shape", ["X"], ["sh"], name="shape").node("Gather", ["sh", "i0"], ["b"], name="gather", axis=0)
    c.node("Unsqueeze", ["b", "ax0"], ["bu"], name="unsq").node("Concat", ["bu", "m1"], ["tgt"], name="concat", axis=0)
    c.node("Reshape", ["X", "tgt"], ["Y"], name="reshape")
    return c


Z4 = np.zeros((4, 512, 2, 2), np.float32)
view_chain("view_static", 4, False).want("Y", Z4.reshape(Z4.shape[0], -1).shape)
(view_chain("view_static_fold", 4, True).want("Y", Z4.reshape(Z4.shape[0], -1).shape).check("removed shape").check("removed gather").check("removed unsq")
 .check("removed concat").check("const tgt").check("const sh").check("alive reshape"))
view_chain("view_symbolic", "batch", False).want("Y", ["$batch", Z4[0].size])
(view_chain("view_symbolic_fold", "batch", True).want("Y", ["$batch", Z4[0].size]).check("alive shape")
 .check("alive concat"))
(Case("shape_start_end", 15).input("X", F, [2, 3, 4, 5]).node("Shape", ["X"], ["s"], start=1, end=-1)
 .node("Shape", ["X"], ["t"], start=-1).node("Size", ["X"], ["z"]))
(Case("flatten_axis").input("X", F, [2, 3, 4, 5]).node("Flatten", ["X"], ["Y"], axis=2)
 .node("Flatten", ["X"], ["Z"], axis=0).node("Flatten", ["X"], ["U"], axis=-1))
(Case("expand_where").input("X", F, [3, 1]).init("s", I64, [3], [2, 1, 6]).input("c", B, [1, 6])
 .input("y", F, [6]).node("Expand", ["X", "s"], ["E"]).node("Where", ["c", "E", "y"], ["W"]))
(Case("constant_of_shape_range").init("s", I64, [2], [3, 5]).init("a", I64, [], [2]).init("l", I64, [], [11])
 .init("d", I64, [], [3]).node("ConstantOfShape", ["s"], ["Z"], value=helper.make_tensor("v", I64, [1], [1]))
 .node("Range", ["a", "l", "d"], ["R"]))

# ---- slice / split / squeeze ----------------------------------------------------------------------
(Case("slice_neg_clamp_steps").input("X", F, [10, 20, 30])
 .init("st", I64, [2], [-3, 2]).init("en", I64, [2], [BIG, -1]).init("ax", I64, [2], [0, 2])
 .init("st2", I64, [1], [-1]).init("en2", I64, [1], [-BIG - 1]).init("ax2", I64, [1], [1]).init("sp2", I64, [1], [-2])
 .init("st3", I64, [1], [5]).init("en3", I64, [1], [100]).init("ax3", I64, [1], [-1]).init("sp3", I64, [1], [3])
 .node("Slice", ["X", "st", "en", "ax"], ["Y1"]).node("Slice", ["X", "st2", "en2", "ax2", "sp2"], ["Y2"])
 .node("Slice", ["X", "st3", "en3", "ax3", "sp3"], ["Y3"]))
(Case("slice_attr_form", 9).input("X", F, [10, 20, 30])
 .node("Slice", ["X"], ["Y"], starts=[1, -5], ends=[1000, -2], axes=[0, 2])
 .want("Y", np.zeros((10, 20, 30))[1:1000, :, -5:-2].shape))
(Case("slice_symbolic").input("X", F, ["batch", "seq", 64]).init("st", I64, [1], [0]).init("en", I64, [1], [BIG])
 .init("ax", I64, [1], [1]).node("Slice", ["X", "st", "en", "ax"], ["Y"]))
(Case("split_attr", 11).input("X", F, [4, 10]).node("Split", ["X"], ["a", "b", "c"], axis=1, split=[2, 3, 5])
 .node("Split", ["X"], ["d", "e"], axis=0))
(Case("split_input", 13).input("X", F, [4, 10]).init("sp", I64, [2], [3, 7])
 .node("Split", ["X", "sp"], ["a", "b"], axis=-1).node("Split", ["X"], ["c", "d", "e", "f"], axis=0))
(Case("squeeze_unsqueeze_attr", 11).input("X", F, [1, 3, 1, 5])
 .node("Squeeze", ["X"], ["A"], axes=[0, 2]).node("Squeeze", ["X"], ["Bq"])
 .node("Unsqueeze", ["A"], ["C"], axes=[0, -1])
 .want("Bq", np.zeros((1, 3, 1, 5)).squeeze().shape))
(Case("squeeze_unsqueeze_input", 13).input("X", F, [1, 3, 1, 5]).init("ax", I64, [2], [0, -2])
 .init("ux", I64, [2], [1, 3])
 .node("Squeeze", ["X", "ax"], ["A"]).node("Squeeze", ["X"], ["Bq"]).node("Unsqueeze", ["A", "ux"], ["C"]))

# ---- reductions / normalisation -------------------------------------------------------------------
(Case("reduce_keepdims").input("X", F, [2, 3, 4])
 .node("ReduceMean", ["X"], ["A"], axes=[1]).node("ReduceMean", ["X"], ["Bm"], axes=[-1, 0], keepdims=0)
 .node("ReduceMax", ["X"], ["C"], keepdims=0).node("ArgMax", ["X"], ["D"], axis=1, keepdims=0)
 .node("ArgMin", ["X"], ["E"], axis=-1, select_last_index=1))
(Case("reduce_sum_input", 13).input("X", F, [2, 3, 4]).init("ax", I64, [1], [2])
 .node("ReduceSum", ["X", "ax"], ["A"], keepdims=0).node("ReduceSum", ["X"], ["Bs"]))
(Case("softmax_layernorm", 17).input("X", F, ["batch", 8, 16]).weight("g", F, [16]).weight("b", F, [16])
 .node("Softmax", ["X"], ["S"]).node("LogSoftmax", ["X"], ["L"], axis=1)
 .node("LayerNormalization", ["X", "g", "b"], ["Y", "Mn", "Inv"], axis=-1))
(Case("batchnorm").input("X", F, [2, 6, 5, 5]).weight("s", F, [6]).weight("b", F, [6]).weight("m", F, [6])
 .weight("v", F, [6]).node("BatchNormalization", ["X", "s", "b", "m", "v"], ["Y"]))

# ---- resize ------------------------------------------------------------------------------------------
(Case("resize_scales").input("X", F, [1, 3, 15, 20]).init("sc", F, [4], [1, 1, 1.5, 2])
 .node("Resize", ["X", "-", "sc"], ["Y"], mode="nearest"))
(Case("resize_sizes").input("X", F, [1, 3, 15, 20]).init("roi", F, [0], []).init("sc", F, [0], [])
 .init("sz", I64, [4], [1, 3, 7, 9]).node("Resize", ["X", "roi", "sc", "sz"], ["Y"], mode="linear"))
(Case("resize_opset10", 10).input("X", F, [1, 3, 15, 20]).init("sc", F, [4], [1, 1, 2, 2])
 .node("Resize", ["X", "sc"], ["Y"]))
(Case("upsample_opset9", 9).input("X", F, [1, 3, 15, 20]).init("sc", F, [4], [1, 1, 2, 3])
 .node("Upsample", ["X", "sc"], ["Y"]))

# ---- recurrent ------------------------------------------------------------------------------------------
(Case("lstm_bidir").input("X", F, [7, 2, 10]).weight("W", F, [2, 64, 10]).weight("R", F, [2, 64, 16])
 .weight("B", F, [2, 128]).node("LSTM", ["X", "W", "R", "B"], ["Y", "Yh", "Yc"], hidden_size=16,
                                 direction="bidirectional"))
(Case("gru_layout", 14).input("X", F, [3, 7, 10]).weight("W", F, [1, 48, 10]).weight("R", F, [1, 48, 16])
 .node("GRU", ["X", "W", "R"], ["Y", "Yh"], hidden_size=16, layout=1))
(Case("rnn_seq_symbolic").input("X", F, ["seq", 4, 10]).weight("W", F, [1, 8, 10]).weight("R", F, [1, 8, 8])
 .node("RNN", ["X", "W", "R"], ["Y", "Yh"], hidden_size=8))

# ---- misc ops -------------------------------------------------------------------------------------------
(Case("gather_variants").input("X", F, [5, 6, 7]).init("i", I64, [2, 3], [0, 1, 2, 3, 4, 0])
 .input("ie", I64, [5, 2, 7]).init("ind", I64, [4, 2], [0, 1, 1, 2, 2, 3, 3, 4])
 .node("Gather", ["X", "i"], ["G"], axis=1).node("GatherElements", ["X", "ie"], ["E"], axis=1)
 .node("GatherND", ["X", "ind"], ["N"]))
(Case("concat_transpose").input("A", F, [2, 3, 4]).input("Bc", F, [2, 5, 4])
 .node("Concat", ["A", "Bc"], ["C"], axis=-2).node("Transpose", ["C"], ["T"], perm=[2, 0, 1])
 .node("Transpose", ["A"], ["U"]))
(Case("tile_pad").input("X", F, [2, 3]).init("r", I64, [2], [2, 3]).init("p", I64, [4], [1, 0, 2, 1])
 .node("Tile", ["X", "r"], ["T"]).node("Pad", ["X", "p"], ["P"], mode="reflect"))
(Case("pad_attr", 10).input("X", F, [1, 3, 4, 4]).node("Pad", ["X"], ["P"], pads=[0, 0, 1, 2, 0, 0, 3, 4]))
(Case("depth_space").input("X", F, [1, 8, 3, 4]).node("DepthToSpace", ["X"], ["D"], blocksize=2)
 .node("SpaceToDepth", ["D"], ["S"], blocksize=2))
(Case("topk_nonzero").input("X", F, [3, 10]).init("k", I64, [1], [4])
 .node("TopK", ["X", "k"], ["V", "I"], axis=1).node("NonZero", ["X"], ["N"]))
(Case("cast_compare").input("X", F, [2, 3]).input("Yv", F, [3])
 .node("Cast", ["X"], ["C"], to=I64).node("Less", ["X", "Yv"], ["L"]).node("Not", ["L"], ["N"])
 .node("Equal", ["C", "C"], ["E"]).node("Clip", ["X"], ["K"]))
(Case("onehot_cumsum_trilu", 14).input("X", I64, [2, 3]).init("d", I64, [], [10]).init("v", F, [2], [0, 1])
 .input("M", F, [4, 4]).init("ax", I32, [], [1])
 .node("OneHot", ["X", "d", "v"], ["O"], axis=1).node("CumSum", ["M", "ax"], ["S"])
 .node("Trilu", ["M"], ["T"], upper=0)
 .want("O", np.moveaxis(np.eye(10)[np.zeros((2, 3), np.int64)], -1, 1).shape))
(Case("dropout_mask", 13).input("X", F, [2, 3]).node("Dropout", ["X"], ["Y", "Mk"]))
(Case("broadcast_ops").input("A", F, ["N", 1, 4]).input("Bb", F, [3, 1]).input("Cc", F, [1])
 .node("Add", ["A", "Bb"], ["S"]).node("Sum", ["A", "Bb", "Cc"], ["T"]).node("Pow", ["A", "Cc"], ["P"])
 .node("Max", ["A", "Bb"], ["M"]))

# ---- errors -------------------------------------------------------------------------------------------
Case("err_matmul").input("A", F, [2, 3]).input("B", F, [4, 5]).node("MatMul", ["A", "B"], ["Y"], name="mm_bad").error("mm_bad")
Case("err_add").input("A", F, [2, 3]).input("B", F, [2, 4]).node("Add", ["A", "B"], ["Y"], name="add_bad").error("add_bad")
(Case("err_concat").input("A", F, [2, 3]).input("B", F, [4, 5]).node("Concat", ["A", "B"], ["Y"], name="cat_bad", axis=0)
 .error("cat_bad"))
# Gemm: A^T is [3,2] (K=2) but B is [3,4] (K=3) (onnx 1.12 does not check Gemm's inner dims)
(Case("err_gemm").input("A", F, [2, 3]).weight("Bw", F, [3, 4])
 .node("Gemm", ["A", "Bw"], ["Y"], name="gemm_bad", transA=1).error("gemm_bad", onnx_detects=False))
# 2*3 = 6 elements cannot become 4*2 = 8 (onnx 1.12 does not check element counts)
(Case("err_reshape").input("A", F, [2, 3]).init("s", I64, [2], [4, 2])
 .node("Reshape", ["A", "s"], ["Y"], name="rs_bad").error("rs_bad", onnx_detects=False))

# BatchNormalization's scale has 4 entries for 6 channels (a kernel would read past its end)
(Case("err_batchnorm").input("X", F, [2, 6, 5, 5]).weight("s", F, [4]).weight("b", F, [6])
 .weight("m", F, [6]).weight("v", F, [6])
 .node("BatchNormalization", ["X", "s", "b", "m", "v"], ["Y"], name="bn_bad").error("bn_bad", onnx_detects=False))


def main():
    out = ["# generated by tests/ops/make_expect.py with onnx %s; do not edit" % onnx.__version__]
    for c in CASES:
        c.emit(out)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expect_shapes.txt")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(path + ".tmp", path)
    print("wrote %s (%d cases)" % (path, len(CASES)))


if __name__ == "__main__":
    main()
