/* fuzz_sqlite_load.c: libFuzzer target for gopt's SQLite loaders. The input bytes are written to a
 * temporary .sqlite file (in /dev/shm when writable) and opened through gopt's own loaders: as a
 * measured-cost database (gopt_costdb_load) and, from a fresh copy, as a run history
 * (gopt_history_list, then gopt_history_best for the first record's model, cluster and task). Each
 * must either fail with one error line that names the file, or give a valid database: cost entries
 * with seconds >= 0, that survive a save to JSON and a reload unchanged; history records whose
 * strings are readable. Any crash, sanitizer report or violated check is a finding (fuzz/run.sh;
 * replayed by ctest sqlite_fuzz_seed_corpus / sqlite_fuzz_regressions through fuzz/replay_onnx.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/costdb.h"
#include "gopt/history.h"

static char db_path[96], json_path[96];

static void fz_fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_sqlite_load: %s: %s\n", what, detail);
  abort();
}

/* Removes the database and the WAL files SQLite leaves beside it. */
static void fz_remove(void) {
  char p[128];
  unlink(db_path);
  snprintf(p, sizeof p, "%s-wal", db_path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", db_path);
  unlink(p);
  snprintf(p, sizeof p, "%s-journal", db_path);
  unlink(p);
}

static int fz_write(const uint8_t *data, size_t size) {
  fz_remove();
  FILE *f = fopen(db_path, "wb");
  if (!f) return -1;
  size_t w = size ? fwrite(data, 1, size, f) : 0;
  return fclose(f) || w != size ? -1 : 0;
}

/* A failure must be one line naming the file. */
static void fz_check_error(const char *what, const gopt_error *err) {
  if (!err->msg[0] || strchr(err->msg, '\n') || !strstr(err->msg, db_path)) fz_fail(what, err->msg);
}

static int fz_same_entry(const gopt_cost_entry *a, const gopt_cost_entry *b) {
  return a->sig == b->sig && !strcmp(a->op, b->op) && !strcmp(a->desc, b->desc) && a->seconds == b->seconds &&
         a->reps == b->reps;
}

/* A loaded cost database: seconds >= 0, and a JSON save + reload gives the same entries. */
static void fz_check_costdb(const gopt_costdb *db) {
  size_t n = gopt_costdb_size(db);
  for (size_t i = 0; i < n; i++) {
    const gopt_cost_entry *e = gopt_costdb_at(db, i);
    if (!e->op || !e->desc || !(e->seconds >= 0) || !isfinite(e->seconds)) fz_fail("costdb", "entry without op/desc or with bad seconds");
  }
  gopt_error err = {0};
  gopt_costdb *again = NULL;
  if (gopt_costdb_save(db, json_path, &err)) return; /* cannot write /tmp: nothing to compare */
  if (gopt_costdb_load(json_path, &again, &err)) fz_fail("costdb JSON reload", err.msg);
  if (gopt_costdb_size(again) != n) fz_fail("costdb JSON reload", "different entry count");
  for (size_t i = 0; i < n; i++) {
    gopt_cost_entry e;
    if (!gopt_costdb_get(again, gopt_costdb_at(db, i)->sig, &e) || !fz_same_entry(&e, gopt_costdb_at(db, i)))
      fz_fail("costdb JSON reload", "an entry changed");
  }
  gopt_costdb_free(again);
  unlink(json_path);
}

typedef struct fz_first {
  int seen;
  uint64_t hash;
  char cluster[256], task[64];
} fz_first;

static size_t fz_len(const char *s) { return s ? strlen(s) : 0; }

/* Reads every string of every record (a bad pointer shows under ASan) and keeps the first's key. */
static int fz_on_record(const gopt_history_record *r, void *user) {
  fz_first *f = user;
  volatile size_t n = fz_len(r->time) + fz_len(r->model) + fz_len(r->command) + fz_len(r->task) + fz_len(r->cluster) +
                      fz_len(r->method) + fz_len(r->decisions) + fz_len(r->decisions_file) + fz_len(r->version);
  (void)n;
  if (!f->seen) {
    f->seen = 1;
    f->hash = r->model_hash;
    snprintf(f->cluster, sizeof f->cluster, "%s", r->cluster ? r->cluster : "");
    snprintf(f->task, sizeof f->task, "%s", r->task ? r->task : "");
  }
  return 0;
}

static void fz_history(void) {
  gopt_error err = {0};
  fz_first first = {0};
  if (gopt_history_list(db_path, 0, fz_on_record, &first, &err)) {
    fz_check_error("history list", &err);
    return;
  }
  if (!first.seen) return;
  char *dec = NULL, method[64];
  int rc = gopt_history_best(db_path, first.hash, first.cluster, first.task, &dec, method, sizeof method, &err);
  if (rc < 0) fz_check_error("history best", &err);
  else if (rc == 1 && (!dec || !memchr(method, 0, sizeof method))) fz_fail("history best", "found without decisions");
  else if (rc != 0 && rc != 1) fz_fail("history best", "unexpected return value");
  free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!db_path[0]) { /* in memory when /dev/shm exists: SQLite syncs the file on every open */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(db_path, sizeof db_path, "%s/gopt-fuzz-sqlite-%d.sqlite", dir, (int)getpid());
    snprintf(json_path, sizeof json_path, "%s/gopt-fuzz-sqlite-%d.json", dir, (int)getpid());
  }
  gopt_error err = {0};
  gopt_costdb *db = NULL;
  if (!fz_write(data, size)) {
    if (gopt_costdb_load(db_path, &db, &err)) fz_check_error("costdb load", &err);
    else fz_check_costdb(db);
    gopt_costdb_free(db);
  }
  if (!fz_write(data, size)) fz_history(); /* the cost loader may have added its tables */
  fz_remove();
  return 0;
}
