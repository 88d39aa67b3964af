/* nn_ckpt.c: versioned binary checkpoints of parameters and training state (optimizer moments and
 * step, RNG state, caller's step). Saved atomically (temp file in the same directory, fsync,
 * rename); loading verifies magic, version, sizes, checksum, names and shapes before touching the
 * model, and reports any mismatch as one error line. Little-endian hosts only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/util.h"
#include "nn/nn_internal.h"
#include "nn/nn_optim.h"

static const char MAGIC[8] = {'G', 'O', 'P', 'T', 'N', 'N', 'C', 'K'};
enum { REC_PARAM = 0, REC_MOM1 = 1, REC_MOM2 = 2 };
#define META_BYTES 64  /* i64 user_step, i64 optim_t, u32 optim_kind, u32 has_optim, u32 has_rng, u32 0, u64 rng[4] */

/* FNV-1a over the payload (gopt_hash_bytes with seed 0). */
static uint64_t fnv1a(const unsigned char *p, size_t n) { return gopt_hash_bytes(p, n, 0); }

typedef struct buf { unsigned char *p; size_t n, cap; int oom; } buf;
static void put(buf *b, const void *d, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) { b->oom = 1; return; }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void put_record(buf *b, const gopt_nn_tensor *t, uint8_t kind) {
  uint16_t nl = (uint16_t)strlen(t->name);
  uint8_t nd = (uint8_t)t->ndim;
  put(b, &nl, 2);
  put(b, t->name, nl);
  put(b, &kind, 1);
  put(b, &nd, 1);
  put(b, t->shape, 8 * (size_t)t->ndim);
}

int gopt_nn_ckpt_save(const char *path, const gopt_nn_params *p, const gopt_nn_optim *o,
                      const gopt_nn_rng *rng, int64_t user_step, gopt_error *err) {
  if (!path || !p) return nn_err(err, GOPT_EINVAL, "nn_ckpt: NULL path or params");
  gopt_nn_params *pp = (gopt_nn_params *)p;
  if (!gopt_nn_params_data(pp)) return nn_err(err, GOPT_EINVAL, "%s: params not finalized", path);
  if (o && o->p != p) return nn_err(err, GOPT_EINVAL, "%s: optimizer belongs to other params", path);
  int np = gopt_nn_params_count(p), nrec = np * (o ? 3 : 1);
  size_t total = gopt_nn_params_total(p);
  uint64_t payload = (uint64_t)total * 4 * (o ? 3 : 1) + META_BYTES;
  uint32_t ver = GOPT_NN_CKPT_VERSION, nr = (uint32_t)nrec;
  buf b = {0};
  put(&b, MAGIC, 8);
  put(&b, &ver, 4);
  put(&b, &nr, 4);
  put(&b, &payload, 8);
  for (int k = 0; k < (o ? 3 : 1); k++)
    for (int i = 0; i < np; i++) put_record(&b, gopt_nn_params_get(p, i), (uint8_t)k);
  put(&b, gopt_nn_params_data(pp), total * 4);
  if (o) put(&b, o->state, 2 * total * 4);
  unsigned char meta[META_BYTES] = {0};
  int64_t ot = o ? o->t : 0;
  uint32_t kind = o ? (uint32_t)o->cfg.kind : 0, has_o = o ? 1 : 0, has_r = rng ? 1 : 0;
  memcpy(meta, &user_step, 8);
  memcpy(meta + 8, &ot, 8);
  memcpy(meta + 16, &kind, 4);
  memcpy(meta + 20, &has_o, 4);
  memcpy(meta + 24, &has_r, 4);
  if (rng) memcpy(meta + 32, rng->s, 32);
  put(&b, meta, META_BYTES);
  if (b.oom) { free(b.p); return nn_err(err, GOPT_ENOMEM, "%s: out of memory building checkpoint", path); }
  uint64_t h = fnv1a(b.p, b.n);
  put(&b, &h, 8);
  if (b.oom) { free(b.p); return nn_err(err, GOPT_ENOMEM, "%s: out of memory building checkpoint", path); }

  int rc = gopt_file_write_atomic(path, b.p, b.n, err);

  free(b.p);
  return rc;
}

static void shape_str(char *s, size_t n, int nd, const int64_t *sh) {
  size_t k = (size_t)snprintf(s, n, "[");
  for (int i = 0; i < nd && k < n; i++) k += (size_t)snprintf(s + k, n - k, i ? ",%lld" : "%lld", (long long)sh[i]);
  if (k < n) snprintf(s + k, n - k, "]");
}

int gopt_nn_ckpt_load(const char *path, gopt_nn_params *p, gopt_nn_optim *o, gopt_nn_rng *rng,
                      int64_t *user_step, gopt_error *err) {
  if (!path || !p) return nn_err(err, GOPT_EINVAL, "nn_ckpt: NULL path or params");
  if (!gopt_nn_params_data(p)) return nn_err(err, GOPT_EINVAL, "%s: params not finalized", path);
  int rc = 0;
  unsigned char *d = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return nn_err(err, GOPT_EIO, "%s: cannot open checkpoint", path);
  long sz = -1;
  if (fseek(f, 0, SEEK_END) == 0) sz = ftell(f);
  if (sz < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return nn_err(err, GOPT_EIO, "%s: cannot seek", path); }
  d = malloc((size_t)sz + 1);
  if (!d) { fclose(f); return nn_err(err, GOPT_ENOMEM, "%s: out of memory (%ld bytes)", path, sz); }
  size_t got = fread(d, 1, (size_t)sz, f);
  fclose(f);
  size_t n = got;
  if (got != (size_t)sz) { rc = nn_err(err, GOPT_EIO, "%s: read failed", path); goto done; }
  if (n < 8 || memcmp(d, MAGIC, 8) != 0) {
    rc = nn_err(err, GOPT_EPARSE, "%s: not a gopt nn checkpoint (bad magic)", path);
    goto done;
  }
  if (n < 24) { rc = nn_err(err, GOPT_EPARSE, "%s: truncated checkpoint (%zu bytes, header needs 24)", path, n); goto done; }
  uint32_t ver, nr;
  uint64_t payload;
  memcpy(&ver, d + 8, 4);
  memcpy(&nr, d + 12, 4);
  memcpy(&payload, d + 16, 8);
  if (ver != GOPT_NN_CKPT_VERSION) {
    rc = nn_err(err, GOPT_EUNSUP, "%s: checkpoint version %u, this build reads version %d", path, ver, GOPT_NN_CKPT_VERSION);
    goto done;
  }
  /* walk the record table with bounds checks */
  size_t off = 24;
  int np = gopt_nn_params_count(p);
  size_t total = gopt_nn_params_total(p);
  int kinds_in_file = 0;
  for (uint32_t r = 0; r < nr; r++) {
    uint16_t nl;
    if (off + 2 > n) goto trunc;
    memcpy(&nl, d + off, 2);
    if (off + 2 + nl + 2 > n) goto trunc;
    const char *name = (const char *)d + off + 2;
    uint8_t kind = d[off + 2 + nl], nd = d[off + 3 + nl];
    off += 4 + (size_t)nl;
    if (nd < 1 || nd > GOPT_NN_MAX_DIMS || kind > REC_MOM2) {
      rc = nn_err(err, GOPT_EPARSE, "%s: record %u: bad kind %u or rank %u", path, r, kind, nd);
      goto done;
    }
    if (off + 8u * nd > n) goto trunc;
    int64_t sh[GOPT_NN_MAX_DIMS];
    memcpy(sh, d + off, 8u * nd);
    off += 8u * nd;
    int i = (int)(r % (uint32_t)(np ? np : 1));
    if ((int)(r / (uint32_t)(np ? np : 1)) != kind || r >= (uint32_t)np * 3) {
      rc = nn_err(err, GOPT_ESHAPE, "%s: %u records do not fit a model with %d parameters", path, nr, np);
      goto done;
    }
    gopt_nn_tensor *t = gopt_nn_params_get(p, i);
    int same = t && strlen(t->name) == nl && memcmp(t->name, name, nl) == 0 && t->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = t->shape[k] == sh[k];
    if (!same) {
      char a[96], b2[96];
      shape_str(a, sizeof a, nd, sh);
      if (t) shape_str(b2, sizeof b2, t->ndim, t->shape); else snprintf(b2, sizeof b2, "(none)");
      rc = nn_err(err, GOPT_ESHAPE, "%s: parameter %d is '%.*s' %s in the file but '%s' %s in the model",
                  path, i, (int)nl, name, a, t ? t->name : "(none)", b2);
      goto done;
    }
    kinds_in_file = kind + 1;
  }
  if (nr != (uint32_t)np * (uint32_t)kinds_in_file || (kinds_in_file != 1 && kinds_in_file != 3)) {
    rc = nn_err(err, GOPT_ESHAPE, "%s: %u records in the file, model has %d parameters", path, nr, np);
    goto done;
  }
  uint64_t want_payload = (uint64_t)total * 4 * (uint64_t)kinds_in_file + META_BYTES;
  if (payload != want_payload) {
    rc = nn_err(err, GOPT_EPARSE, "%s: payload is %llu bytes, records imply %llu", path,
                (unsigned long long)payload, (unsigned long long)want_payload);
    goto done;
  }
  if (n < off + payload + 8) {
    rc = nn_err(err, GOPT_EPARSE, "%s: truncated checkpoint (%zu bytes, expected %llu)", path, n,
                (unsigned long long)(off + payload + 8));
    goto done;
  }
  if (n > off + payload + 8) { rc = nn_err(err, GOPT_EPARSE, "%s: %zu trailing bytes after checkpoint", path, n - (size_t)(off + payload + 8)); goto done; }
  uint64_t h;
  memcpy(&h, d + off + payload, 8);
  if (h != fnv1a(d, (size_t)(off + payload))) {
    rc = nn_err(err, GOPT_EPARSE, "%s: checksum mismatch (file corrupted)", path);
    goto done;
  }
  const unsigned char *meta = d + off + payload - META_BYTES;
  int64_t us, ot;
  uint32_t okind, has_o, has_r;
  memcpy(&us, meta, 8);
  memcpy(&ot, meta + 8, 8);
  memcpy(&okind, meta + 16, 4);
  memcpy(&has_o, meta + 20, 4);
  memcpy(&has_r, meta + 24, 4);
  if (o && (!has_o || kinds_in_file != 3)) { rc = nn_err(err, GOPT_ESHAPE, "%s: checkpoint has no optimizer state", path); goto done; }
  if (o && okind != (uint32_t)o->cfg.kind) {
    rc = nn_err(err, GOPT_EINVAL, "%s: optimizer kind %u in the file, %d in use", path, okind, (int)o->cfg.kind);
    goto done;
  }
  if (o && o->total != total) { rc = nn_err(err, GOPT_ESHAPE, "%s: optimizer size mismatch", path); goto done; }
  if (rng && !has_r) { rc = nn_err(err, GOPT_ESHAPE, "%s: checkpoint has no RNG state", path); goto done; }
  /* everything checked: apply */
  memcpy(gopt_nn_params_data(p), d + off, total * 4);
  if (o) {
    memcpy(o->state, d + off + total * 4, 2 * total * 4);
    o->t = ot;
  }
  if (rng) memcpy(rng->s, meta + 32, 32);
  if (user_step) *user_step = us;
  goto done;
trunc:
  rc = nn_err(err, GOPT_EPARSE, "%s: truncated checkpoint (record table cut at %zu bytes)", path, n);
done:
  free(d);
  return rc;
}
