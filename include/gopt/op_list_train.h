/* gopt/op_list_train.h: gopt's own training op kinds (backward and optimizer-update ops) that
 * gopt_train_build emits, as an X-macro list in the format of op_list.h:
 * GOPT_OP(ENUM_SUFFIX, "TypeName", CLASS). Type names are domain-free CamelCase. Semantics
 * (inputs, outputs, attributes) are in docs/TRAINING.md; shape and cost rules in
 * src/ops/ops_train.c.
 *
 * This file does NOT undefine GOPT_OP: op_list.h includes it before its own #undef. A
 * standalone user defines GOPT_OP, includes this file and undefines GOPT_OP itself. */
/* convolution */
GOPT_OP(CONV_GRAD_INPUT, "ConvGradInput", CONV)
GOPT_OP(CONV_GRAD_WEIGHT, "ConvGradWeight", CONV)
/* elementwise activation gradients */
GOPT_OP(RELU_GRAD, "ReluGrad", ELEMWISE)
GOPT_OP(SIGMOID_GRAD, "SigmoidGrad", ELEMWISE)
GOPT_OP(TANH_GRAD, "TanhGrad", ELEMWISE)
GOPT_OP(GELU_GRAD, "GeluGrad", ELEMWISE)
GOPT_OP(ERF_GRAD, "ErfGrad", ELEMWISE)
GOPT_OP(ELEMENTWISE_GRAD, "ElementwiseGrad", ELEMWISE)
/* normalisations and softmax */
GOPT_OP(SOFTMAX_GRAD, "SoftmaxGrad", REDUCE)
GOPT_OP(LOG_SOFTMAX_GRAD, "LogSoftmaxGrad", REDUCE)
GOPT_OP(LAYER_NORM_GRAD, "LayerNormGrad", REDUCE)
GOPT_OP(BATCH_NORM_GRAD, "BatchNormGrad", REDUCE)
/* pooling and reductions (broadcast dY back to the input shape) */
GOPT_OP(MAX_POOL_GRAD, "MaxPoolGrad", CONV)
GOPT_OP(AVERAGE_POOL_GRAD, "AveragePoolGrad", CONV)
GOPT_OP(GLOBAL_AVG_POOL_GRAD, "GlobalAveragePoolGrad", BROADCAST)
GOPT_OP(REDUCE_SUM_GRAD, "ReduceSumGrad", BROADCAST)
GOPT_OP(REDUCE_MEAN_GRAD, "ReduceMeanGrad", BROADCAST)
/* data movement: scatter dY into a zero tensor of the input's shape */
GOPT_OP(GATHER_GRAD, "GatherGrad", INJECTIVE)
GOPT_OP(SLICE_GRAD, "SliceGrad", INJECTIVE)
GOPT_OP(PAD_GRAD, "PadGrad", INJECTIVE)
GOPT_OP(RESIZE_GRAD, "ResizeGrad", INJECTIVE)
/* recurrent */
GOPT_OP(LSTM_GRAD, "LSTMGrad", OPAQUE)
GOPT_OP(GRU_GRAD, "GRUGrad", OPAQUE)
GOPT_OP(RNN_GRAD, "RNNGrad", OPAQUE)
/* optimizer updates */
GOPT_OP(SGD_UPDATE, "SGDUpdate", ELEMWISE)
GOPT_OP(MOMENTUM_UPDATE, "MomentumUpdate", ELEMWISE)
GOPT_OP(ADAM_UPDATE, "AdamUpdate", ELEMWISE)
