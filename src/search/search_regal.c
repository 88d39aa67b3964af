/* search_regal.c: REGAL's chromosome for "brkga-regal" (search.h): per DEVICE variable one
 * affinity gene per device (the device is the argmax), per PRIORITY variable one scheduling
 * priority gene, per FUSE variable one gene; its length, decoder and encoder. The decoded vector's
 * priorities are list-scheduled by the simulator (ready nodes in decreasing priority). */
#include "gopt/task.h"
#include "search/search_internal.h"

static double clamp01(double k) {
  if (!(k >= 0)) return 0; /* NaN and negatives */
  return k > 1 ? 1 : k;
}

/* Genes of variable v. */
static size_t regal_var_genes(const gopt_env_var *v) {
  return v->kind == GOPT_VAR_DEVICE && v->card > 1 ? (size_t)v->card : 1;
}

size_t search_regal_len(const gopt_env_var *vars, size_t nv) {
  size_t n = 0;
  for (size_t i = 0; i < nv; i++) n += regal_var_genes(&vars[i]);
  return n;
}

void search_regal_decode(const gopt_env_var *vars, size_t nv, const double *genes, double *x) {
  const double *g = genes;
  for (size_t i = 0; i < nv; i++) {
    size_t k = regal_var_genes(&vars[i]);
    if (vars[i].kind == GOPT_VAR_PRIORITY) {
      x[i] = clamp01(g[0]);
    } else if (vars[i].kind == GOPT_VAR_FUSE) {
      x[i] = vars[i].card == 2 && clamp01(g[0]) > 0.5 ? 1 : 0;
    } else {
      size_t best = 0; /* argmax; ties to the lower device */
      for (size_t d = 1; d < k; d++)
        if (clamp01(g[d]) > clamp01(g[best])) best = d;
      x[i] = (double)best;
    }
    g += k;
  }
}

void search_regal_encode(const gopt_env_var *vars, size_t nv, const double *x, double *genes) {
  double *g = genes;
  for (size_t i = 0; i < nv; i++) {
    size_t k = regal_var_genes(&vars[i]);
    if (vars[i].kind == GOPT_VAR_PRIORITY)
      g[0] = x[i];
    else if (vars[i].kind == GOPT_VAR_FUSE)
      g[0] = x[i] > 0 ? 0.75 : 0.25;
    else
      for (size_t d = 0; d < k; d++) g[d] = (double)d == x[i] || k == 1 ? 0.75 : 0.25;
    g += k;
  }
}

size_t gopt_search_regal_genes(const gopt_env *e) { return search_regal_len(gopt_env_vars(e), gopt_env_nvars(e)); }

void gopt_search_regal_decode(const gopt_env *e, const double *genes, double *x) {
  search_regal_decode(gopt_env_vars(e), gopt_env_nvars(e), genes, x);
}
