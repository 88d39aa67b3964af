/* learn_file.c: policy files (.gpol): header and metadata text (task, feature version,
 * architecture, training set, trainer state) around the NN engine's checkpoint, one checksum over
 * everything, atomic writes; and where the shipped policies are found. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/util.h"
#include "gopt/learn_seq.h"
#include "learn/learn_internal.h"

static const char MAGIC[8] = {'G', 'O', 'P', 'T', 'P', 'O', 'L', '1'};

/* A temporary file path for one checkpoint round trip (created empty; caller unlinks). */
static int tmp_path(char *buf, size_t n, gopt_error *err) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  snprintf(buf, n, "%s/gopt-ckpt-XXXXXX", dir);
  int fd = mkstemp(buf);
  if (fd < 0) return gopt_error_set(err, GOPT_EIO, "%s: cannot create a temporary file: %s", buf, strerror(errno));
  close(fd);
  return 0;
}

int learn_ckpt_to_blob(const gopt_nn_params *p, const gopt_nn_optim *o, const gopt_nn_rng *rng,
                       int64_t step, unsigned char **blob, size_t *len, gopt_error *err) {
  char path[512];
  *blob = NULL;
  int rc = tmp_path(path, sizeof path, err);
  if (rc) return rc;
  rc = gopt_nn_ckpt_save(path, p, o, rng, step, err);
  void *b = NULL;
  rc = rc ? rc : gopt_file_read(path, &b, len, err);
  unlink(path);
  *blob = b;
  return rc;
}

int learn_ckpt_from_blob(const char *label, const unsigned char *blob, size_t len, gopt_nn_params *p,
                         gopt_nn_optim *o, gopt_nn_rng *rng, int64_t *step, gopt_error *err) {
  char path[512];
  int rc = tmp_path(path, sizeof path, err);
  if (rc) return rc;
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(blob, 1, len, f) != len) rc = gopt_error_set(err, GOPT_EIO, "%s: cannot write a temporary file", path);
  if (f && fclose(f) && !rc) rc = gopt_error_set(err, GOPT_EIO, "%s: cannot write a temporary file", path);
  if (!rc && (rc = gopt_nn_ckpt_load(path, p, o, rng, step, err)) && err) {
    char msg[sizeof err->msg];
    size_t pl = strlen(path);
    const char *rest = strncmp(err->msg, path, pl) == 0 && err->msg[pl] == ':' ? err->msg + pl + 2 : err->msg;
    snprintf(msg, sizeof msg, "%.200s: embedded network: %.280s", label, rest);
    memcpy(err->msg, msg, sizeof msg);
  }
  unlink(path);
  return rc;
}

typedef learn_buf wbuf;
void learn_buf_put(learn_buf *b, const void *d, size_t n) {
  if (b->oom || n == 0) return; /* (nothing to add: b->p may still be NULL) */
  if (b->n + n > b->cap) {
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + n) c *= 2;
    unsigned char *q = realloc(b->p, c);
    if (!q) { b->oom = 1; return; }
    b->p = q;
    b->cap = c;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}
static void put(wbuf *b, const void *d, size_t n) { learn_buf_put(b, d, n); }
static void putf(wbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(wbuf *b, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (k > 0) put(b, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
}

/* The metadata text of p. */
static void put_meta(wbuf *m, const gopt_policy *p) {
  const gopt_learn_arch *a = &p->arch;
  putf(m, "task %s\nfeat_version %d\n", gopt_task_name(p->task), GOPT_LEARN_FEAT_VERSION);
  if (p->head == LEARN_HEAD_REGAL) putf(m, "kind regal\n"); /* absent: a GO policy */
  if (p->localadv) putf(m, "model localadv\n");
  putf(m, "arch %d %d %d %d %d\n", a->hidden, a->sage_layers, a->heads, a->seg_len, a->dev_hidden);
  if (p->seg > 0) /* absent: the per-node head */
    putf(m, "place_head segment %d feats %d order %s\n", p->seg, p->seg_nf,
         p->seg_order == GOPT_LEARN_ORDER_LIST ? "list" : "index");
  putf(m, "iters %lld\ntrain_state %d\ntotal_iters %lld\nn_graphs %zu\n", (long long)p->iter,
       p->has_train, (long long)p->total_iters, p->has_train ? p->n_graphs : (size_t)0);
  for (size_t i = 0; p->has_train && i < p->n_graphs; i++) putf(m, "g %zu %a %a\n", i, p->ema[i], p->best[i]);
  const char *s = p->trainset ? p->trainset : "";
  while (*s) {
    const char *e = strchr(s, '\n');
    size_t l = e ? (size_t)(e - s) : strlen(s);
    put(m, "set ", 4);
    put(m, s, l);
    put(m, "\n", 1);
    s += l + (e ? 1 : 0);
  }
}

int learn_file_write(const char *path, const void *meta, size_t meta_len, const unsigned char *ck,
                     size_t ckn, gopt_error *err) {
  wbuf b = {0};
  uint32_t ver = GOPT_LEARN_FILE_VERSION, ml = (uint32_t)meta_len;
  uint64_t cl = ckn;
  put(&b, MAGIC, 8);
  put(&b, &ver, 4);
  put(&b, &ml, 4);
  put(&b, meta, meta_len);
  put(&b, &cl, 8);
  put(&b, ck, ckn);
  uint64_t h = b.oom ? 0 : gopt_hash_bytes(b.p, b.n, 0);
  put(&b, &h, 8);
  int rc = b.oom ? gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the policy", path)
                 : gopt_file_write_atomic(path, b.p, b.n, err);
  free(b.p);
  return rc;
}

int gopt_policy_save(const gopt_policy *p, const char *path, gopt_error *err) {
  wbuf m = {0};
  unsigned char *ck = NULL;
  size_t ckn = 0;
  int rc = 0;
  if (p->has_train && p->ckpt) { ck = p->ckpt; ckn = p->ckpt_len; }
  else if ((rc = learn_ckpt_to_blob(p->params, NULL, NULL, p->iter, &ck, &ckn, err))) return rc;
  put_meta(&m, p);
  if (m.oom) rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the policy", path);
  else rc = learn_file_write(path, m.p, m.n, ck, ckn, err);
  if (ck != p->ckpt) free(ck);
  free(m.p);
  return rc;
}

/* Parses the metadata lines into a new policy (weights not loaded yet). */
static int parse_meta(const char *path, char *meta, int want_task, int want_la, gopt_policy **out, gopt_error *err) {
  int task = -1, fv = -1, has_train = 0, la = 0, head = LEARN_HEAD_GO;
  gopt_learn_arch a = {.clusters = -1}; /* files without a place_head line have the per-node head */
  long long iters = 0, total = 0;
  size_t ng = 0, gi = 0;
  double *ema = NULL, *best = NULL;
  wbuf set = {0};
  int rc = 0;
  for (char *line = strtok(meta, "\n"); line; line = strtok(NULL, "\n")) {
    char name[32];
    if (!strncmp(line, "task seq:", 9)) {
      rc = gopt_error_set(err, GOPT_EINVAL, "%s: policy is for the sequential agent ('%s'), not a task policy", path, line + 5);
      goto done;
    } else if (!strncmp(line, "task ", 5)) task = gopt_task_from_name(line + 5);
    else if (!strncmp(line, "kind ", 5)) {
      if (strcmp(line + 5, "regal")) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: unknown policy kind '%.40s'", path, line + 5); goto done; }
      head = LEARN_HEAD_REGAL;
    }
    else if (sscanf(line, "feat_version %d", &fv) == 1) {}
    else if (!strcmp(line, "model localadv")) la = 1;
    else if (sscanf(line, "arch %d %d %d %d %d", &a.hidden, &a.sage_layers, &a.heads, &a.seg_len, &a.dev_hidden) == 5) {}
    else if (!strncmp(line, "place_head ", 11)) {
      char ord[16] = "index"; /* file versions 2 and 3: no order field */
      int k = sscanf(line, "place_head segment %d feats %d order %15s", &a.clusters, &a.seg_feats, ord);
      if (k == 1) a.seg_feats = LEARN_SEG_NF_V2; /* file version 2: no feats field */
      a.seg_order = !strcmp(ord, "list") ? GOPT_LEARN_ORDER_LIST : !strcmp(ord, "index") ? GOPT_LEARN_ORDER_INDEX : -1;
      if (k < 1 || a.clusters <= 0 || a.clusters > 65536 || a.seg_order < 0 || (k == 2 && strstr(line, " order")) ||
          (a.seg_order == GOPT_LEARN_ORDER_LIST && a.seg_feats == LEARN_SEG_NF_V2) ||
          !LEARN_SEG_FEATS_OK(a.seg_feats)) {
        rc = gopt_error_set(err, GOPT_EPARSE, "%s: bad placement head line '%.60s'", path, line);
        goto done;
      }
    }
    else if (sscanf(line, "iters %lld", &iters) == 1) {}
    else if (sscanf(line, "train_state %d", &has_train) == 1) {}
    else if (sscanf(line, "total_iters %lld", &total) == 1) {}
    else if (sscanf(line, "n_graphs %zu", &ng) == 1) {
      if (ng > (1u << 24)) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: bad graph count", path); goto done; }
      free(ema); free(best);
      ema = calloc(ng + 1, sizeof *ema);
      best = calloc(ng + 1, sizeof *best);
      if (!ema || !best) { rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path); goto done; }
    } else if (!strncmp(line, "g ", 2)) {
      size_t i;
      double e1, b1;
      if (sscanf(line, "g %zu %la %la", &i, &e1, &b1) != 3 || i >= ng || !ema) {
        rc = gopt_error_set(err, GOPT_EPARSE, "%s: bad trainer state line", path);
        goto done;
      }
      ema[i] = e1;
      best[i] = b1;
      gi++;
    } else if (!strncmp(line, "set ", 4)) {
      put(&set, line + 4, strlen(line + 4));
      put(&set, "\n", 1);
    } else if (sscanf(line, "%31s", name) == 1) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: unknown policy metadata '%s'", path, name);
      goto done;
    }
  }
  put(&set, "", 1);
  if (fv != GOPT_LEARN_FEAT_VERSION) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: policy uses feature version %d, this build uses %d (retrain it)", path, fv, GOPT_LEARN_FEAT_VERSION);
    goto done;
  }
  if (task < 0) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: policy names no known task", path); goto done; }
  if (want_task >= 0 && task != want_task) {
    rc = gopt_error_set(err, GOPT_EINVAL, "%s: policy is for task '%s', not '%s'", path, gopt_task_name(task), gopt_task_name(want_task));
    goto done;
  }
  if (want_la >= 0 && la != want_la) {
    rc = gopt_error_set(err, GOPT_EINVAL, la ? "%s: a local advantage model (for --method guided), not a GO policy"
                                             : "%s: a GO policy, not a local advantage model", path);
    goto done;
  }
  if (has_train && gi != ng) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: trainer state has %zu of %zu graphs", path, gi, ng); goto done; }
  if (set.oom) { rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path); goto done; }
  if ((rc = learn_policy_build(task, &a, 0, la ? LEARN_HEAD_LOCALADV : head, out, err))) {
    gopt_error_prefix(err, "%s: ", path);
    goto done;
  }
  gopt_policy *p = *out;
  free(p->trainset);
  p->trainset = (char *)set.p;
  set.p = NULL;
  p->iter = iters;
  p->total_iters = total;
  p->has_train = has_train;
  if (has_train) { p->n_graphs = ng; p->ema = ema; p->best = best; ema = best = NULL; }
done:
  free(ema);
  free(best);
  free(set.p);
  return rc;
}

int gopt_policy_load(const char *path, int task, gopt_policy **out, gopt_error *err) {
  return learn_policy_load(path, task, 0, out, err);
}

int learn_file_read(const char *path, learn_file *f, gopt_error *err) {
  memset(f, 0, sizeof *f);
  void *v = NULL;
  size_t n = 0;
  int rc = gopt_file_read(path, &v, &n, err);
  if (rc) return rc;
  unsigned char *d = v;
  uint32_t ver = 0, ml = 0;
  uint64_t cl = 0, h;
  if (n < 8 || memcmp(d, MAGIC, 8)) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: not a gopt policy file (bad magic)", path); goto done; }
  if (n < 16) goto trunc;
  memcpy(&ver, d + 8, 4);
  memcpy(&ml, d + 12, 4);
  if (ver < 1 || ver > GOPT_LEARN_FILE_VERSION) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: policy file version %u, this build reads versions 1 to %d", path, ver, GOPT_LEARN_FILE_VERSION);
    goto done;
  }
  if ((uint64_t)ml + 24 > n) goto trunc;
  memcpy(&cl, d + 16 + ml, 8);
  if (cl > n || 16 + (uint64_t)ml + 8 + cl + 8 > n) goto trunc;
  if (16 + (uint64_t)ml + 8 + cl + 8 < n) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: trailing bytes after the policy", path); goto done; }
  memcpy(&h, d + n - 8, 8);
  if (h != gopt_hash_bytes(d, n - 8, 0)) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: checksum mismatch (policy file corrupted)", path); goto done; }
  if (!(f->meta = malloc((size_t)ml + 1))) { rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path); goto done; }
  memcpy(f->meta, d + 16, ml);
  f->meta[ml] = 0;
  f->buf = d;
  f->ck = d + 16 + ml + 8;
  f->ck_len = (size_t)cl;
  return 0;
trunc:
  rc = gopt_error_set(err, GOPT_EPARSE, "%s: truncated policy file (%zu bytes)", path, n);
done:
  free(v);
  return rc;
}

int learn_file_restore(const char *path, const learn_file *f, gopt_nn_params *params, int has_train,
                       unsigned char **ckpt, size_t *len, gopt_error *err) {
  int64_t step = 0;
  int rc = learn_ckpt_from_blob(path, f->ck, f->ck_len, params, NULL, NULL, &step, err);
  if (rc || !has_train) return rc;
  if (!(*ckpt = malloc(f->ck_len + 1))) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  memcpy(*ckpt, f->ck, f->ck_len);
  *len = f->ck_len;
  return 0;
}

void learn_file_free(learn_file *f) {
  if (!f) return;
  free(f->meta);
  free(f->buf);
  memset(f, 0, sizeof *f);
}

int learn_policy_load(const char *path, int task, int localadv, gopt_policy **out, gopt_error *err) {
  *out = NULL;
  learn_file f;
  int rc = learn_file_read(path, &f, err);
  if (rc) return rc;
  if (!(rc = parse_meta(path, f.meta, task, localadv, out, err)))
    rc = learn_file_restore(path, &f, (*out)->params, (*out)->has_train, &(*out)->ckpt, &(*out)->ckpt_len, err);
  if (rc) { gopt_policy_free(*out); *out = NULL; }
  learn_file_free(&f);
  return rc;
}

static int exists(const char *p) { return access(p, R_OK) == 0; }

int gopt_learn_find_policy(int task, const char *exe, char *buf, size_t n, gopt_error *err) {
  return gopt_learn_find_policy_kind(task, "go", exe, buf, n, err);
}

int gopt_learn_find_policy_kind(int task, const char *kind, const char *exe, char *buf, size_t n, gopt_error *err) {
  const char *tn = gopt_task_name(task);
  const char *sfx = kind && !strcmp(kind, "regal") ? "_regal" : kind && !strcmp(kind, "host") ? "_host" : "";
  if (!tn) return gopt_error_set(err, GOPT_EINVAL, "learn: unknown task %d", task);
  char name[64];
  snprintf(name, sizeof name, "%s%s.gpol", tn, sfx);
  if (!learn_find_file(name, exe, buf, n, NULL)) return 0;
  return gopt_error_set(err, GOPT_EIO, "no %spolicy for task '%s': none in $GOPT_POLICY_DIR or policies/ %s (give --policy P.gpol)", sfx[0] ? "REGAL " : "", tn, gopt_shipped_places());
}

int learn_find_file(const char *name, const char *exe, char *buf, size_t n, gopt_error *err) {
  const char *env = getenv("GOPT_POLICY_DIR");
  char rel[128];
  if (env && *env) {
    snprintf(buf, n, "%s/%s", env, name);
    if (exists(buf)) return 0;
  }
  snprintf(rel, sizeof rel, "policies/%s", name);
  if (gopt_find_shipped(rel, exe, buf, n)) return 0;
  return gopt_error_set(err, GOPT_EIO, "no %s: none in $GOPT_POLICY_DIR or policies/ %s (give --policy P.gpol)", name, gopt_shipped_places());
}

int gopt_seq_find_policy(const char *kind, const char *exe, char *buf, size_t n, gopt_error *err) {
  char name[64];
  snprintf(name, sizeof name, "%.40s.gpol", kind);
  if (!learn_find_file(name, exe, buf, n, NULL)) return 0;
  return gopt_error_set(err, GOPT_EIO, "no '%s' policy: no %s in $GOPT_POLICY_DIR or policies/ %s (give --policy P.gpol)", kind, name, gopt_shipped_places());
}
