/* sim_state.c: the per-thread simulator workspace: allocation, applying decisions (placement,
 * fusion groups with their convexity check and group costs, priorities, explicit order) and the
 * incremental single-node changes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/costdb.h"
#include "sim/sim_internal.h"
#include "util/util_internal.h"

static void free_fused(gopt_sim_state *st) {
  void *arrs[] = {st->unit_of, st->u_off, st->u_pos, st->f_in_off, st->f_in, st->f_out_off,
                  st->f_out, st->f_cons_off, st->f_cons, st->f_aprod, st->f_cost, st->f_dprio,
                  st->f_flops, st->f_bytes, st->f_obytes, st->f_drank, st->f_drunit};
  for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
  st->unit_of = st->u_off = st->u_pos = st->f_in_off = st->f_in = st->f_out_off = st->f_out =
      st->f_cons_off = st->f_cons = st->f_aprod = NULL;
  st->f_cost = st->f_dprio = st->f_flops = st->f_bytes = st->f_obytes = NULL;
  st->f_drank = st->f_drunit = NULL;
}

void sim_state_unfuse(gopt_sim_state *st) {
  const gopt_sim *s = st->s;
  free_fused(st);
  st->fused = 0;
  st->U = s->n;
  st->in_off = s->in_off;
  st->in_act = s->in_act;
  st->out_off = s->out_off;
  st->out_act = s->out_act;
  st->cons_off = s->cons_off;
  st->cons = s->cons;
  st->aprod = s->act_prod;
  st->ucost = s->ncost;
  st->udprio = s->dprio;
  st->uobytes = s->out_bytes;
  st->udrank = s->drank;
  st->udrunit = s->drunit;
}

void gopt_sim_state_free(gopt_sim_state *st) {
  if (!st) return;
  free_fused(st);
  void *arrs[] = {st->pdev, st->pprio, st->prank, st->ur, st->uprio, st->ukey, st->rorder,
                  st->runit, st->sk, st->su, st->bm, st->seq, st->act, st->x, st->dv, st->dcnt,
                  st->hbase, st->ddirty, st->dlist, st->peak, st->over, st->busy, st->resid,
                  st->endmem, st->rescnt, st->lk, st->ldirty, st->lbytes, st->lbusy, st->ev,
                  st->slog, st->sre, st->plog, st->rlog, st->xlog, st->ck, st->aref, st->pend,
                  st->uq, st->bq, st->kdev, st->kpd, st->kact, st->kxh, st->kev, st->kc, st->klo};
  for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
  sim_delta_free(st);
  free(st);
}

gopt_sim_state *gopt_sim_state_new(const gopt_sim *s) {
  gopt_sim_state *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  st->s = s;
  st->D = s->D;
  st->L = s->L;
  st->n = s->n;
  size_t n = (size_t)s->n, D = (size_t)s->D, L = (size_t)s->L, A = (size_t)s->n_act;
  st->capx = (size_t)s->in_off[s->n]; /* a transfer needs at least one consumer on its device */
  /* decrements per run: pending and transfer refs at most one per input edge, act refs one per
   * consumer (local or via a transfer) plus one per graph output */
  st->capl = (size_t)s->in_off[s->n] + (size_t)s->n_gout;
  st->ck_max = SIM_CK_MAX;
  st->ck_size = sim_ck_size(s->D, s->L);
  /* ready-queue bitmaps (sim_run.c): 64 ranks per level-0 word, 64 words per level-1 word,
   * 64 level-1 words per level-2 word */
  size_t w0 = (n + 63) / 64, w1 = (w0 + 63) / 64, w2 = (w1 + 63) / 64;
  st->bm_off[0] = 0;
  st->bm_off[1] = w0 + 1;
  st->bm_off[2] = w0 + 1 + w1 + 1;
  st->bm_words = w0 + w1 + w2 + 3;
  void *ur = NULL;
  if (posix_memalign(&ur, 64, (n + 1) * sizeof *st->ur)) ur = NULL;
  st->ur = ur;
  if (!st->ur || GOPT_ALLOC(st->pdev, n) || GOPT_ALLOC(st->pprio, n) || GOPT_ALLOC(st->prank, n) ||
      GOPT_ALLOC(st->uprio, n) || GOPT_ALLOC(st->ukey, n) || GOPT_ALLOC(st->rorder, n) ||
      GOPT_ALLOC(st->runit, n) || GOPT_ALLOC(st->sk, 2 * n) || GOPT_ALLOC(st->su, 3 * n) || GOPT_ALLOC(st->seq, n) ||
      GOPT_ALLOC(st->act, A) || GOPT_ALLOC(st->aref, A + 1) || GOPT_ALLOC(st->pend, n + 1) || GOPT_ALLOC(st->uq, n + 1) || GOPT_ALLOC(st->x, st->capx) || GOPT_ALLOC(st->dv, D) || GOPT_ALLOC(st->dcnt, D) ||
      GOPT_ALLOC(st->hbase, D + 1) || GOPT_ALLOC(st->ddirty, D) || GOPT_ALLOC(st->dlist, D) ||
      GOPT_ALLOC(st->peak, D) || GOPT_ALLOC(st->over, D) || GOPT_ALLOC(st->busy, D) || GOPT_ALLOC(st->resid, D) ||
      GOPT_ALLOC(st->endmem, D) || GOPT_ALLOC(st->rescnt, (size_t)s->n_res * D) || GOPT_ALLOC(st->lk, L) ||
      GOPT_ALLOC(st->ldirty, L) || GOPT_ALLOC(st->lbytes, L) || GOPT_ALLOC(st->lbusy, L) ||
      GOPT_ALLOC(st->ev, D + L + 1) || GOPT_ALLOC(st->slog, n) || GOPT_ALLOC(st->sre, n) || GOPT_ALLOC(st->plog, st->capl) ||
      GOPT_ALLOC(st->rlog, st->capl) || GOPT_ALLOC(st->xlog, st->capl) ||
      GOPT_ALLOC(st->ck, (size_t)st->ck_max * st->ck_size) || GOPT_ALLOC(st->bm, D * st->bm_words) ||
      GOPT_ALLOC(st->bq, D) || GOPT_ALLOC(st->kpd, n + 1) || GOPT_ALLOC(st->kact, A + 1) ||
      GOPT_ALLOC(st->kxh, A + 1) || GOPT_ALLOC(st->kc, n + 1) || GOPT_ALLOC(st->klo, D + 1) || GOPT_ALLOC(st->kev, D + L + 1) ||
      (D <= 255 && !(st->kdev = calloc(n + 1, 1)))) {
    gopt_sim_state_free(st);
    return NULL;
  }
  for (size_t d = 0; d < D; d++) {
    uint64_t *b = st->bm + d * st->bm_words;
    st->bq[d] = (bm_q){b, b + st->bm_off[1], b + st->bm_off[2]};
  }
  memset(st->ur, 0, (n + 1) * sizeof *st->ur);
  sim_state_unfuse(st);
  for (size_t p = 0; p < n; p++) {
    st->pdev[p] = -1;
    st->pprio[p] = NAN;
    st->uq[p].dev = 0;
    st->uprio[p] = s->dprio[p];
    st->ukey[p] = sim_key(s->dprio[p]);
    st->uq[p].rank = s->drank[p];
    st->runit[p] = s->drunit[p];
  }
  st->dcnt[0] = s->n;
  st->incremental = 1;
  st->rec_next = 1;
  st->delta = 1;
  st->dl_done = INT32_MAX;
  st->inc_from = INT32_MAX;
  return st;
}

/* Names up to three nodes of group k for messages. */
static void group_names(const gopt_sim *s, const int32_t *gpos, int32_t cnt, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  for (int32_t i = 0; i < cnt && i < 3 && k < len; i++)
    k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "",
                          gopt_node_name(s->g, s->order[gpos[i]]));
  if (cnt > 3 && k < len) snprintf(buf + k, len - k, ", ... %d nodes", cnt);
}

/* Builds the fused units from grp (per position: group index or -1; ng groups). On success the
 * state's unit arrays describe the quotient graph; on error nothing changes. */
static int build_fused(gopt_sim_state *st, const int32_t *grp, int32_t ng, const int32_t *gid,
                       gopt_error *err) {
  const gopt_sim *s = st->s;
  const int32_t n = s->n, A = s->n_act, D = s->D;
  int rc = GOPT_OK;
  int32_t *key = NULL, *k_off = NULL, *k_pos = NULL, *indeg = NULL, *hp = NULL, *unit = NULL,
          *stamp = NULL, *stack = NULL, *kminpos = NULL, *korder = NULL;
  int32_t *u_off = NULL, *u_pos = NULL, *unit_of = NULL, *in_off = NULL, *in = NULL,
          *out_off = NULL, *out = NULL, *cons_off = NULL, *cons = NULL, *aprod = NULL;
  double *cost = NULL, *dprio = NULL, *flops = NULL, *bytes = NULL, *obytes = NULL;
  int32_t *drank = NULL, *drunit = NULL;
  char names[200];
  /* keys: groups 0..ng-1, singletons ng.. */
  int32_t K = ng;
  if (GOPT_ALLOC(key, n) || GOPT_ALLOC(k_off, n + ng + 1) || GOPT_ALLOC(stamp, n > A ? n : A) || GOPT_ALLOC(stack, n))
    goto oom;
  for (int32_t p = 0; p < n; p++) key[p] = grp[p] >= 0 ? grp[p] : K++;
  if (GOPT_ALLOC(k_pos, n) || GOPT_ALLOC(indeg, K) || GOPT_ALLOC(hp, K) || GOPT_ALLOC(unit, K) || GOPT_ALLOC(kminpos, K) ||
      GOPT_ALLOC(korder, K))
    goto oom;
  for (int32_t p = 0; p < n; p++) k_off[key[p] + 1]++;
  for (int32_t k = 0; k < K; k++) k_off[k + 1] += k_off[k];
  for (int32_t k = 0; k < K; k++) hp[k] = k_off[k];
  for (int32_t p = 0; p < n; p++) k_pos[hp[key[p]]++] = p; /* ascending positions per key */
  for (int32_t k = 0; k < ng; k++)
    if (k_off[k + 1] == k_off[k]) {
      rc = gopt_error_set(err, GOPT_EINVAL, "fusion: group %d is empty", gid ? gid[k] : k);
      goto done;
    }
  /* convexity of each group: no path leaves it and comes back */
  for (int32_t i = 0; i < n; i++) stamp[i] = -1;
  for (int32_t k = 0; k < ng; k++) {
    int32_t lo = k_off[k], hi = k_off[k + 1], maxpos = k_pos[hi - 1], sp = 0;
    for (int32_t i = lo; i < hi; i++) {
      int32_t p = k_pos[i];
      for (int32_t o = s->out_off[p]; o < s->out_off[p + 1]; o++) {
        int32_t a = s->out_act[o];
        for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++) {
          int32_t c = s->cons[j];
          if (key[c] != k && c < maxpos && stamp[c] != k) {
            stamp[c] = k;
            stack[sp++] = c;
          }
        }
      }
    }
    while (sp > 0) {
      int32_t q = stack[--sp];
      for (int32_t o = s->out_off[q]; o < s->out_off[q + 1]; o++) {
        int32_t a = s->out_act[o];
        for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++) {
          int32_t c = s->cons[j];
          if (key[c] == k) {
            group_names(s, k_pos + lo, hi - lo, names, sizeof names);
            rc = gopt_error_set(err, GOPT_EINVAL,
                                "fusion: group %d (%s) is not convex: a path leaves it and "
                                "returns through node '%s' into node '%s'",
                                gid ? gid[k] : k, names, gopt_node_name(s->g, s->order[q]),
                                gopt_node_name(s->g, s->order[c]));
            goto done;
          }
          if (c < maxpos && stamp[c] != k) {
            stamp[c] = k;
            stack[sp++] = c;
          }
        }
      }
    }
  }
  /* Kahn's algorithm on the quotient graph; ready keys by smallest first position */
  for (int32_t k = 0; k < K; k++) kminpos[k] = k_pos[k_off[k]];
  for (int32_t a = 0; a < A; a++) {
    int32_t pk = key[s->act_prod[a]];
    for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++)
      if (key[s->cons[j]] != pk) indeg[key[s->cons[j]]]++;
  }
  int32_t hn = 0, U = 0;
#define HLESS(x, y) (kminpos[x] < kminpos[y])
#define HPUSH(v)                                                          \
  do {                                                                    \
    int32_t i_ = hn++;                                                    \
    hp[i_] = (v);                                                         \
    while (i_ > 0 && HLESS(hp[i_], hp[(i_ - 1) / 2])) {                   \
      int32_t t_ = hp[i_]; hp[i_] = hp[(i_ - 1) / 2]; hp[(i_ - 1) / 2] = t_; \
      i_ = (i_ - 1) / 2;                                                  \
    }                                                                     \
  } while (0)
  for (int32_t k = 0; k < K; k++)
    if (!indeg[k]) HPUSH(k);
  while (hn > 0) {
    int32_t k = hp[0];
    hp[0] = hp[--hn];
    for (int32_t i = 0;;) {
      int32_t l = 2 * i + 1, r = l + 1, m = i;
      if (l < hn && HLESS(hp[l], hp[m])) m = l;
      if (r < hn && HLESS(hp[r], hp[m])) m = r;
      if (m == i) break;
      int32_t t = hp[i]; hp[i] = hp[m]; hp[m] = t;
      i = m;
    }
    unit[k] = U;
    korder[U++] = k;
    for (int32_t i = k_off[k]; i < k_off[k + 1]; i++) {
      int32_t p = k_pos[i];
      for (int32_t o = s->out_off[p]; o < s->out_off[p + 1]; o++) {
        int32_t a = s->out_act[o];
        for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++) {
          int32_t ck = key[s->cons[j]];
          if (ck != k && --indeg[ck] == 0) HPUSH(ck);
        }
      }
    }
  }
#undef HPUSH
#undef HLESS
  if (U < K) {
    for (int32_t k = 0; k < ng; k++)
      if (indeg[k]) {
        group_names(s, k_pos + k_off[k], k_off[k + 1] - k_off[k], names, sizeof names);
        rc = gopt_error_set(err, GOPT_EINVAL,
                            "fusion: group %d (%s) and another group depend on each other (fusing "
                            "both would make a cycle)", gid ? gid[k] : k, names);
        goto done;
      }
    rc = gopt_error_set(err, GOPT_EINVAL, "fusion: groups form a cycle");
    goto done;
  }
  /* unit arrays */
  if (GOPT_ALLOC(u_off, U + 1) || GOPT_ALLOC(u_pos, n) || GOPT_ALLOC(unit_of, n) || GOPT_ALLOC(in_off, U + 1) ||
      GOPT_ALLOC(out_off, U + 1) || GOPT_ALLOC(cons_off, A + 1) || GOPT_ALLOC(aprod, A) ||
      GOPT_ALLOC(in, s->in_off[n]) || GOPT_ALLOC(out, A) || GOPT_ALLOC(cons, s->in_off[n]) ||
      GOPT_ALLOC(cost, (size_t)U * D) || GOPT_ALLOC(dprio, U) || GOPT_ALLOC(flops, U) || GOPT_ALLOC(bytes, U) ||
      GOPT_ALLOC(obytes, U) || GOPT_ALLOC(drank, U) || GOPT_ALLOC(drunit, U))
    goto oom;
  for (int32_t u = 0, kk = 0; u < U; u++) {
    int32_t k = korder[u];
    u_off[u] = kk;
    for (int32_t i = k_off[k]; i < k_off[k + 1]; i++) {
      u_pos[kk++] = k_pos[i];
      unit_of[k_pos[i]] = u;
    }
    u_off[u + 1] = kk;
  }
  for (int32_t a = 0; a < A; a++) aprod[a] = unit_of[s->act_prod[a]];
  /* inputs (distinct acts from other units) and boundary outputs */
  for (int32_t a = 0; a < A; a++) stamp[a] = -1;
  int32_t ki = 0, ko = 0;
  for (int32_t u = 0; u < U; u++) {
    in_off[u] = ki;
    out_off[u] = ko;
    for (int32_t i = u_off[u]; i < u_off[u + 1]; i++) {
      int32_t p = u_pos[i];
      for (int32_t j = s->in_off[p]; j < s->in_off[p + 1]; j++) {
        int32_t a = s->in_act[j];
        if (aprod[a] != u && stamp[a] != u) {
          stamp[a] = u;
          in[ki++] = a;
        }
      }
      for (int32_t j = s->out_off[p]; j < s->out_off[p + 1]; j++) {
        int32_t a = s->out_act[j];
        int boundary = s->act_out[a] || s->cons_off[a] == s->cons_off[a + 1];
        for (int32_t c = s->cons_off[a]; c < s->cons_off[a + 1] && !boundary; c++)
          boundary = unit_of[s->cons[c]] != u;
        if (boundary) out[ko++] = a;
      }
    }
  }
  in_off[U] = ki;
  out_off[U] = ko;
  for (int32_t u = 0; u < U; u++)
    for (int32_t j = out_off[u]; j < out_off[u + 1]; j++) obytes[u] += s->act_bytes[out[j]];
  /* consumers: distinct units other than the producer */
  for (int32_t a = 0; a < A; a++) stamp[a] = -1;
  int32_t kc = 0;
  for (int32_t a = 0; a < A; a++) {
    cons_off[a] = kc;
    for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++) {
      int32_t cu = unit_of[s->cons[j]];
      if (cu == aprod[a]) continue;
      int dup = 0;
      for (int32_t q = cons_off[a]; q < kc && !dup; q++) dup = cons[q] == cu;
      if (!dup) cons[kc++] = cu;
    }
  }
  cons_off[A] = kc;
  /* costs: singletons keep theirs; a group is one kernel with summed FLOPs and boundary bytes */
  int32_t *rstamp = NULL;
  if (GOPT_ALLOC(rstamp, s->n_res + 1)) goto oom;
  for (int32_t r = 0; r < s->n_res; r++) rstamp[r] = -1;
  for (int32_t u = 0; u < U; u++) {
    int32_t cnt = u_off[u + 1] - u_off[u];
    if (cnt == 1) {
      int32_t p = u_pos[u_off[u]];
      for (int d = 0; d < D; d++) cost[(size_t)d * U + u] = s->ncost[(size_t)d * n + p];
      flops[u] = s->nflops[p];
      bytes[u] = s->nbytes[p];
      continue;
    }
    double f = 0, b = 0, meas = -1;
    int32_t best = -1;
    uint64_t gsig = 0;
    gopt_cost_entry ge;
    for (int32_t i = u_off[u]; i < u_off[u + 1]; i++) {
      int32_t p = u_pos[i];
      if (s->nsig) gsig = gopt_group_sig_add(gsig, s->nsig[p]);
      f += s->nflops[p];
      if (s->ncls[p] != GOPT_OPC_SHAPE && (best < 0 || s->nflops[p] > s->nflops[best])) best = p;
      for (int32_t j = s->nres_off[p]; j < s->nres_off[p + 1]; j++)
        if (rstamp[s->nres[j]] != u) {
          rstamp[s->nres[j]] = u;
          b += s->res_bytes[s->nres[j]];
        }
    }
    for (int32_t j = in_off[u]; j < in_off[u + 1]; j++) b += s->act_bytes[in[j]];
    for (int32_t j = out_off[u]; j < out_off[u + 1]; j++) b += s->act_bytes[out[j]];
    int cls = best >= 0 ? s->ncls[best] : GOPT_OPC_SHAPE;
    int dt = best >= 0 ? s->ndt[best] : s->ndt[u_pos[u_off[u]]];
    /* a group the executor profiled (gopt run --profile --fusion --costdb): its measured time */
    if (s->nsig && gopt_costdb_get_run(s->db, gopt_group_sig_end(gsig, cnt), &ge)) meas = ge.seconds;
    for (int d = 0; d < D; d++) {
      const gopt_device *dv = &s->cl->devices[d];
      int use_meas = meas >= 0 && dv->measured;
      double t = use_meas ? meas : gopt_device_kernel_time(dv, cls, dt, f, b);
      /* On a measured-GPU model the class-level terms above know nothing of the anchor's own
       * features (a convolution's shape, waves, grouped or depthwise kind), so they can price
       * the fused group far below its anchor alone (resnet50's layer4 3x3 conv: 145 us alone,
       * 9 us "fused" with BN+ReLU on H100). A fused kernel still does all of its anchor's work:
       * it is never cheaper than the anchor (the member with the most FLOPs) run alone. */
      if (!use_meas && dv->gpu_model && best >= 0) {
        double a = s->ncost[(size_t)d * s->n + best];
        if (a > t) t = a;
      }
      cost[(size_t)d * U + u] = sim_grid(t);
    }
    flops[u] = f;
    bytes[u] = b;
  }
  free(rstamp);
  /* default priority: bottom level on the quotient graph */
  double mx = 0;
  for (int32_t u = U - 1; u >= 0; u--) {
    double best = 0;
    for (int32_t o = out_off[u]; o < out_off[u + 1]; o++) {
      int32_t a = out[o];
      for (int32_t j = cons_off[a]; j < cons_off[a + 1]; j++)
        if (dprio[cons[j]] > best) best = dprio[cons[j]];
    }
    dprio[u] = cost[u] + best;
    if (dprio[u] > mx) mx = dprio[u];
  }
  for (int32_t u = 0; u < U; u++) dprio[u] = mx > 0 ? dprio[u] / mx : 0;
  /* their ranks (st->ukey as key scratch: apply rewrites it next) */
  for (int32_t u = 0; u < U; u++) st->ukey[u] = sim_key(dprio[u]);
  sim_rank_keys(st->ukey, U, drank, drunit, st->sk, st->su);
  /* install */
  free_fused(st);
  st->fused = 1;
  st->U = U;
  st->unit_of = unit_of;
  st->u_off = u_off;
  st->u_pos = u_pos;
  st->f_in_off = in_off;
  st->f_in = in;
  st->f_out_off = out_off;
  st->f_out = out;
  st->f_cons_off = cons_off;
  st->f_cons = cons;
  st->f_aprod = aprod;
  st->f_cost = cost;
  st->f_dprio = dprio;
  st->f_flops = flops;
  st->f_bytes = bytes;
  st->f_obytes = obytes;
  st->uobytes = obytes;
  st->f_drank = drank;
  st->f_drunit = drunit;
  st->udrank = drank;
  st->udrunit = drunit;
  st->in_off = in_off;
  st->in_act = in;
  st->out_off = out_off;
  st->out_act = out;
  st->cons_off = cons_off;
  st->cons = cons;
  st->aprod = aprod;
  st->ucost = cost;
  st->udprio = dprio;
  unit_of = u_off = u_pos = in_off = in = out_off = out = cons_off = cons = aprod = NULL;
  cost = dprio = flops = bytes = obytes = NULL;
  drank = drunit = NULL;
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "fusion: out of memory");
done:
  free(key); free(k_off); free(k_pos); free(indeg); free(hp); free(unit); free(stamp);
  free(stack); free(kminpos); free(korder);
  free(u_off); free(u_pos); free(unit_of); free(in_off); free(in); free(out_off); free(out);
  free(cons_off); free(cons); free(aprod); free(cost); free(dprio); free(flops); free(bytes);
  free(obytes); free(drank); free(drunit);
  return rc;
}

/* Recomputes the unit priority of u from its members' explicit priorities (max) or default. */
static void unit_priority(gopt_sim_state *st, int32_t u) {
  double v = NAN;
  if (st->fused) {
    for (int32_t i = st->u_off[u]; i < st->u_off[u + 1]; i++) {
      double q = st->pprio[st->u_pos[i]];
      if (!isnan(q) && (isnan(v) || q > v)) v = q;
    }
  } else {
    v = st->pprio[u];
  }
  st->uprio[u] = isnan(v) ? st->udprio[u] : v;
}

/* Unfused apply of a placement pl and priorities pr (by node id; either NULL: defaults): the raw
 * decisions, devices, default ranks, per-device counts, output bytes and unit priorities. */
static void apply_plain(gopt_sim_state *st, const int32_t *pl, const double *pr) {
  const gopt_sim *s = st->s;
  const int32_t n = s->n, *order = s->order;
  if (pl)
    for (int32_t p = 0; p < n; p++) st->pdev[p] = pl[order[p]];
  else
    for (int32_t p = 0; p < n; p++) st->pdev[p] = -1;
  int32_t cnt[4][64]; /* four histograms: no chain through one counter */
  memset(cnt, 0, sizeof cnt);
  sim_uq *uq = st->uq;
  uint8_t *kdev = st->kdev; /* the streaming layout's copy (sim_stream.c) */
  const int32_t *pdev = st->pdev, *drank = s->drank;
  int32_t p = 0;
  if (s->D <= 64)
    for (; p + 4 <= n; p += 4)
      for (int k = 0; k < 4; k++) {
        int32_t v = pdev[p + k] >= 0 ? pdev[p + k] : 0;
        uq[p + k] = (sim_uq){v, drank[p + k]};
        if (kdev) kdev[drank[p + k]] = (uint8_t)v;
        cnt[k][v]++;
      }
  for (; p < n; p++) {
    int32_t v = pdev[p] >= 0 ? pdev[p] : 0;
    uq[p] = (sim_uq){v, drank[p]};
    if (kdev) kdev[drank[p]] = (uint8_t)v;
    st->dcnt[v]++;
  }
  for (int dv = 0; dv < s->D && dv < 64; dv++) st->dcnt[dv] += cnt[0][dv] + cnt[1][dv] + cnt[2][dv] + cnt[3][dv];
  if (pr) {
    for (p = 0; p < n; p++) {
      double q = pr[order[p]];
      st->pprio[p] = q;
      st->uprio[p] = isnan(q) ? s->dprio[p] : q;
    }
  }
}

void sim_prio_fill(gopt_sim_state *st) {
  if (!st->pdef) return;
  const gopt_sim *s = st->s;
  for (int32_t p = 0; p < s->n; p++) st->pprio[p] = NAN;
  memcpy(st->uprio, s->dprio, (size_t)s->n * sizeof *st->uprio);
  memcpy(st->ukey, s->dkey, (size_t)s->n * sizeof *st->ukey);
  memcpy(st->runit, s->drunit, (size_t)s->n * sizeof *st->runit);
  st->pdef = 0;
}

int gopt_sim_state_apply(gopt_sim_state *st, const gopt_decisions *d, gopt_error *err) {
  const gopt_sim *s = st->s;
  const gopt_graph *g = s->g;
  const int32_t n = s->n;
  int rc = GOPT_OK;
  int32_t *grp = NULL, *gid = NULL, *gmap = NULL;
  if (d && d->n_nodes != g->nodes.n)
    return gopt_error_set(err, GOPT_EINVAL, "decisions: made for %zu nodes, the graph has %zu",
                          d->n_nodes, g->nodes.n);
  /* placement */
  if (d && d->placement) {
    uint32_t bad = 0; /* any device outside -1 .. D - 1 (one branch-free pass, then find it) */
    for (int32_t p = 0; p < n; p++) bad |= (uint32_t)(d->placement[s->order[p]] + 1) > (uint32_t)s->D;
    for (int32_t p = 0; p < n && bad; p++) {
      int32_t v = d->placement[s->order[p]];
      if (v < -1 || v >= s->D)
        return gopt_error_set(err, GOPT_EINVAL,
                              "placement: node '%s' on device %d, the cluster has %d devices",
                              gopt_node_name(g, s->order[p]), v, s->D);
    }
  }
  /* order: a permutation consistent with the dataflow */
  if (d && d->order) {
    if (GOPT_ALLOC(gmap, n)) goto oom;
    for (int32_t p = 0; p < n; p++) gmap[p] = -1;
    for (size_t i = 0; i < d->n_order; i++) {
      int32_t nid = d->order[i];
      int32_t p = (nid >= 0 && (size_t)nid < g->nodes.n) ? s->pos[nid] : -1;
      if (p < 0 || gmap[p] >= 0) {
        rc = gopt_error_set(err, GOPT_EINVAL, "order: entry %zu is not a live node or repeats one", i);
        goto done;
      }
      gmap[p] = (int32_t)i;
    }
    if (d->n_order != (size_t)n) {
      rc = gopt_error_set(err, GOPT_EINVAL, "order: lists %zu nodes, the graph has %d", d->n_order, n);
      goto done;
    }
    for (int32_t a = 0; a < s->n_act; a++)
      for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++)
        if (gmap[s->cons[j]] < gmap[s->act_prod[a]]) {
          rc = gopt_error_set(err, GOPT_EINVAL, "order: node '%s' comes before '%s', which produces its input",
                              gopt_node_name(g, s->order[s->cons[j]]), gopt_node_name(g, s->order[s->act_prod[a]]));
          goto done;
        }
  }
  /* fusion */
  int32_t ng = 0;
  if (d && d->group) {
    if (GOPT_ALLOC(grp, n)) goto oom;
    int32_t maxg = -1;
    for (int32_t p = 0; p < n; p++) {
      grp[p] = d->group[s->order[p]];
      if (grp[p] > maxg) maxg = grp[p];
    }
    if (maxg >= 0) {
      int32_t *remap = NULL;
      if (GOPT_ALLOC(remap, (size_t)maxg + 1) || GOPT_ALLOC(gid, (size_t)maxg + 1)) {
        free(remap);
        goto oom;
      }
      for (int32_t i = 0; i <= maxg; i++) remap[i] = -1;
      for (int32_t p = 0; p < n; p++)
        if (grp[p] >= 0) {
          if (remap[grp[p]] < 0) {
            gid[ng] = grp[p];
            remap[grp[p]] = ng++;
          }
          grp[p] = remap[grp[p]];
        } else {
          grp[p] = -1;
        }
      free(remap);
    }
  }
  /* commit: fusion first (may fail), then the rest */
  if (ng > 0) {
    /* check placements agree inside each group before building */
    if (d->placement) {
      int32_t *gdev = NULL, *gfirst = NULL;
      if (GOPT_ALLOC(gdev, ng) || GOPT_ALLOC(gfirst, ng)) {
        free(gdev);
        free(gfirst);
        goto oom;
      }
      for (int32_t k = 0; k < ng; k++) gdev[k] = -1;
      for (int32_t p = 0; p < n && rc == GOPT_OK; p++) {
        int32_t k = grp[p], v = d->placement[s->order[p]];
        if (k < 0 || v < 0) continue;
        if (gdev[k] < 0) {
          gdev[k] = v;
          gfirst[k] = p;
        } else if (gdev[k] != v) {
          rc = gopt_error_set(err, GOPT_EINVAL,
                              "fusion: group %d has node '%s' on device %d and node '%s' on device "
                              "%d; a group runs on one device", gid[k],
                              gopt_node_name(g, s->order[gfirst[k]]), gdev[k],
                              gopt_node_name(g, s->order[p]), v);
        }
      }
      free(gdev);
      free(gfirst);
      if (rc) goto done;
    }
    if ((rc = build_fused(st, grp, ng, gid, err))) goto done;
  } else {
    sim_state_unfuse(st);
  }
  st->dec_gen++;
  st->inc_valid = 0; /* the next evaluation runs in full */
  st->rec_next = !st->applied || st->moved; /* and records only if single changes may follow */
  st->applied = 1;
  st->moved = 0;
  st->nchg = 0;
  st->res_valid = 0;
  const int32_t *pl = (d && d->placement) ? d->placement : NULL;
  const double *pr = (d && d->priority) ? d->priority : NULL;
  for (int dv = 0; dv < s->D; dv++) st->dcnt[dv] = 0;
  if (!st->fused) { /* units are positions: simple loops over them */
    if (!pr && d && d->order) { /* default priorities under an explicit order: kept, unused */
      for (int32_t p = 0; p < n; p++) st->pprio[p] = NAN;
      memcpy(st->uprio, s->dprio, (size_t)n * sizeof *st->uprio);
    }
    apply_plain(st, pl, pr);
  } else {
    for (int32_t p = 0; p < n; p++) {
      st->pdev[p] = pl ? pl[s->order[p]] : -1;
      st->pprio[p] = pr ? pr[s->order[p]] : NAN;
    }
    for (int32_t u = 0; u < st->U; u++) {
      st->uq[u].dev = 0;
      st->uq[u].rank = st->udrank[u];
    }
    for (int32_t p = 0; p < n; p++)
      if (st->pdev[p] >= 0) st->uq[sim_unit(st, p)].dev = st->pdev[p];
    for (int32_t u = 0; u < st->U; u++) {
      unit_priority(st, u);
      st->dcnt[st->uq[u].dev]++;
    }
  }
  st->strict = d && d->order;
  /* unfused default priorities: uq[].rank holds their ranks (apply_plain); the priorities, keys
   * and units by rank are filled on first use (sim_prio_fill) */
  st->pdef = !st->fused && !pr && !st->strict;
  if (!st->strict) {
    if (!st->pdef)
      for (int32_t u = 0; u < st->U; u++) st->ukey[u] = sim_key(st->uprio[u]);
    if (pr) { /* ranks by sorting (scratch: sk, su; the ranks land in su + 2n first) */
      int32_t *rk = st->su + 2 * (size_t)st->n;
      sim_rank_keys(st->ukey, st->U, rk, st->runit, st->sk, st->su);
      for (int32_t u = 0; u < st->U; u++) st->uq[u].rank = rk[u];
    } else if (!st->pdef) { /* fused default priorities: their ranks (set above) are known */
      memcpy(st->runit, st->udrunit, (size_t)st->U * sizeof *st->runit);
    }
  } else {
    for (int32_t p = 0; p < n; p++) st->prank[p] = gmap[p];
    /* unit rank = smallest member rank (scratch: su); units listed by rank; the queue key is
     * the encoded -rank */
    int32_t *urank = st->su;
    for (int32_t u = 0; u < st->U; u++) urank[u] = INT32_MAX;
    for (int32_t p = 0; p < n; p++) {
      int32_t u = sim_unit(st, p);
      if (gmap[p] < urank[u]) urank[u] = gmap[p];
    }
    /* bucket by rank (ranks < n, distinct per unit) */
    for (int32_t p = 0; p < n; p++) st->seq[p] = -1;
    for (int32_t u = 0; u < st->U; u++) st->seq[urank[u]] = u;
    int32_t k = 0;
    for (int32_t r = 0; r < n; r++)
      if (st->seq[r] >= 0) st->rorder[k++] = st->seq[r];
    for (int32_t u = 0; u < st->U; u++) st->ukey[u] = sim_key(-(double)urank[u]);
    for (int32_t r = 0; r < st->U; r++) {
      st->runit[r] = st->rorder[r];
      st->uq[st->rorder[r]].rank = r;
    }
    /* a fused group must still respect the order between units */
    for (int32_t a = 0; a < s->n_act && st->fused; a++)
      for (int32_t j = st->cons_off[a]; j < st->cons_off[a + 1]; j++)
        if (urank[st->cons[j]] < urank[st->aprod[a]]) {
          rc = gopt_error_set(err, GOPT_EINVAL,
                              "order: fused group of node '%s' must run before its input's "
                              "producer '%s'", gopt_node_name(g, s->order[sim_unit_first(st, st->cons[j])]),
                              gopt_node_name(g, s->order[sim_unit_first(st, st->aprod[a])]));
          free(grp);
          free(gid);
          free(gmap);
          gopt_sim_state_apply(st, NULL, NULL); /* back to the defaults */
          return rc;
        }
  }
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "decisions: out of memory");
done:
  free(grp);
  free(gid);
  free(gmap);
  return rc;
}

/* Lowers the earliest iteration the next evaluation must replay from. */
static inline void inc_note(gopt_sim_state *st, int32_t it) {
  if (it < st->inc_from) st->inc_from = it;
}

/* Builds the per-(resident tensor, device) consumer counts from the current placement and the
 * resident bytes from them (the same sums resident_bytes in sim_run.c makes). */
static void res_build(gopt_sim_state *st) {
  const gopt_sim *s = st->s;
  const int D = st->D;
  memset(st->rescnt, 0, (size_t)s->n_res * (size_t)D * sizeof *st->rescnt);
  for (int32_t q = 0; q < s->n_res; q++)
    for (int32_t j = s->res_off[q]; j < s->res_off[q + 1]; j++)
      st->rescnt[(size_t)q * D + st->uq[sim_unit(st, s->res_cons[j])].dev]++;
  for (int d = 0; d < D; d++) st->resid[d] = 0;
  for (int32_t q = 0; q < s->n_res; q++)
    for (int d = 0; d < D; d++)
      if (st->rescnt[(size_t)q * D + d]) st->resid[d] += s->res_bytes[q];
  st->res_valid = 1;
}

/* Moves position p's resident inputs from device d0 to d1 in the counts and resident bytes. */
static void res_move(gopt_sim_state *st, int32_t p, int d0, int d1) {
  const gopt_sim *s = st->s;
  const int D = st->D;
  for (int32_t j = s->nres_off[p]; j < s->nres_off[p + 1]; j++) {
    int32_t q = s->nres[j];
    int32_t *c = st->rescnt + (size_t)q * D;
    if (--c[d0] == 0) st->resid[d0] -= s->res_bytes[q];
    if (c[d1]++ == 0) st->resid[d1] += s->res_bytes[q];
  }
}

/* Besides recording the decision: when the last evaluation is replayable, notes the earliest
 * iteration that reads the unit's device (the first completion of one of its input producers;
 * sim_run.c explains why nothing earlier can), and keeps the resident bytes and per-device unit
 * counts current. */
int gopt_sim_state_set_device(gopt_sim_state *st, int32_t nid, int device) {
  const gopt_sim *s = st->s;
  if (nid < 0 || (size_t)nid >= s->g->nodes.n || s->pos[nid] < 0 || device < 0 || device >= s->D)
    return GOPT_EINVAL;
  int32_t u = sim_unit(st, s->pos[nid]);
  st->moved = st->rec_next = 1;
  if (st->fused) {
    for (int32_t i = st->u_off[u]; i < st->u_off[u + 1]; i++) st->pdev[st->u_pos[i]] = device;
  } else {
    st->pdev[u] = device;
  }
  int old = st->uq[u].dev;
  if (old == device) return GOPT_OK;
  st->dec_gen++;
  if (st->inc_valid) {
    if (st->strict) {
      st->inc_valid = 0; /* each device's sequence changes: run in full */
    } else {
      int32_t k = st->in_off[u] == st->in_off[u + 1] ? 0 : INT32_MAX;
      for (int32_t j = st->in_off[u]; j < st->in_off[u + 1]; j++) {
        int32_t f = sim_ur_at(st, st->aprod[st->in_act[j]])->fin_it;
        if (f < k) k = f;
      }
      inc_note(st, k);
      sim_delta_note(st, u, 1);
    }
  }
  if (st->inc_valid) {
    if (!st->res_valid) res_build(st);
    if (st->fused) {
      for (int32_t i = st->u_off[u]; i < st->u_off[u + 1]; i++) res_move(st, st->u_pos[i], old, device);
    } else {
      res_move(st, u, old, device);
    }
  } else {
    st->res_valid = 0;
  }
  st->dcnt[old]--;
  st->dcnt[device]++;
  st->uq[u].dev = device;
  if (st->kdev && !st->fused) st->kdev[s->drank[u]] = (uint8_t)device;
  return GOPT_OK;
}

/* Unit u's key changed: moves it to its place in the rank order (the others keep their relative
 * order; those between shift by one). */
static void rank_move(gopt_sim_state *st, int32_t u) {
  const uint64_t *key = st->ukey;
  sim_uq *uq = st->uq;
  int32_t *runit = st->runit;
  int32_t r = uq[u].rank;
  uint64_t k = key[u];
#define BEFORE(v) (key[v] < k || (key[v] == k && (v) < u)) /* v ranks before u */
  while (r > 0 && !BEFORE(runit[r - 1])) {
    runit[r] = runit[r - 1];
    uq[runit[r]].rank = r;
    r--;
  }
  while (r + 1 < st->U && BEFORE(runit[r + 1])) {
    runit[r] = runit[r + 1];
    uq[runit[r]].rank = r;
    r++;
  }
#undef BEFORE
  runit[r] = u;
  uq[u].rank = r;
}

/* Besides recording the decision: when the unit's queue key changes and the last evaluation is
 * replayable, notes the iteration that pushed the unit on its ready queue (the only read of the
 * key; none with an explicit order, where ranks are the keys). */
int gopt_sim_state_set_priority(gopt_sim_state *st, int32_t nid, double priority) {
  const gopt_sim *s = st->s;
  if (nid < 0 || (size_t)nid >= s->g->nodes.n || s->pos[nid] < 0) return GOPT_EINVAL;
  sim_prio_fill(st);
  st->pprio[s->pos[nid]] = priority;
  st->moved = st->rec_next = 1;
  int32_t u = sim_unit(st, s->pos[nid]);
  unit_priority(st, u);
  if (st->strict) return GOPT_OK;
  uint64_t k = sim_key(st->uprio[u]);
  if (k != st->ukey[u]) {
    st->dec_gen++;
    st->ukey[u] = k;
    rank_move(st, u);
    if (st->inc_valid) {
      int32_t ri = sim_ur_at(st, u)->ready_it;
      inc_note(st, ri < 0 ? 0 : ri);
      sim_delta_note(st, u, 0);
    }
  }
  return GOPT_OK;
}

void gopt_sim_state_set_incremental(gopt_sim_state *st, int on) {
  st->incremental = on != 0;
  st->inc_valid = 0;
  st->inc_from = INT32_MAX;
  st->nchg = 0;
}

void gopt_sim_state_set_delta(gopt_sim_state *st, int on) { st->delta = on != 0; }

void gopt_sim_state_inc_stats(const gopt_sim_state *st, gopt_sim_inc_stats *out) {
  *out = st->stats;
  out->checkpoints = st->nck;
  out->ck_every = st->ck_every;
  size_t n = (size_t)st->n;
  out->record_bytes = 2 * n * sizeof(int32_t) + st->capl * 3 * sizeof(int32_t) +
                      (size_t)st->ck_max * st->ck_size +
                      (size_t)st->s->n_res * (size_t)st->D * sizeof(int32_t);
  /* delta evaluation's copies of the recorded tail (allocated on the first delta replay) */
  if (st->old)
    out->record_bytes += st->capx * sizeof(sim_xfer) + st->capl * 3 * sizeof(int32_t) +
                         (size_t)st->D * sizeof(sim_dev) + (size_t)st->L * (sizeof(sim_link) + 8) +
                         (size_t)st->ck_max * st->ck_size;
}

int gopt_sim_state_device(const gopt_sim_state *st, int32_t nid) {
  const gopt_sim *s = st->s;
  if (nid < 0 || (size_t)nid >= s->g->nodes.n || s->pos[nid] < 0) return -1;
  return st->uq[sim_unit(st, s->pos[nid])].dev;
}

size_t gopt_sim_unit_nodes(const gopt_sim_state *st, int32_t nid, int32_t *nodes, size_t max) {
  const gopt_sim *s = st->s;
  if (nid < 0 || (size_t)nid >= s->g->nodes.n || s->pos[nid] < 0) return 0;
  int32_t u = sim_unit(st, s->pos[nid]);
  if (!st->fused) {
    if (max) nodes[0] = nid;
    return 1;
  }
  size_t cnt = (size_t)(st->u_off[u + 1] - st->u_off[u]);
  for (size_t i = 0; i < cnt && i < max; i++) nodes[i] = s->order[st->u_pos[st->u_off[u] + (int32_t)i]];
  return cnt;
}
