/* nn_optim.h: the optimizer's layout, shared by nn_optim.c and nn_ckpt.c (private to src/nn). */
#ifndef GOPT_NN_OPTIM_H
#define GOPT_NN_OPTIM_H
#include "gopt/nn.h"

struct gopt_nn_optim {
  gopt_nn_optim_cfg cfg;
  gopt_nn_params *p;
  float *state;     /* [2*total]: first moment / momentum buffer, then second moment */
  size_t total;
  int64_t t;        /* steps taken */
};
#endif
