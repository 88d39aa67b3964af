/* costdb_sqlite.c: the measured-cost database stored in SQLite (cost_internal.h): table costs
 * keyed by (op signature, device), table steps keyed by (model, device). Written with upserts in
 * one IMMEDIATE transaction under WAL and a busy timeout, so profiling processes and MPI ranks
 * can write at once and no earlier row is lost. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_internal.h"
#include "util/util_sqlite.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS costs(sig TEXT NOT NULL, device TEXT NOT NULL, op TEXT, "
    "desc TEXT, seconds REAL NOT NULL, reps INTEGER, threads INTEGER, "
    "updated TEXT DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY(sig, device));"
    "CREATE TABLE IF NOT EXISTS steps(model TEXT NOT NULL, device TEXT NOT NULL, "
    "seconds REAL NOT NULL, PRIMARY KEY(model, device));";

/* The device whose rows load reads: this host's when present, else the one with most rows. */
static int pick_device(sqlite3 *s, const char *path, char *dev, size_t n, int *threads,
                       gopt_error *err) {
  sqlite3_stmt *st = NULL;
  char host[512];
  gopt_costdb_this_host(host, sizeof host);
  dev[0] = 0;
  *threads = 0;
  const char *q = "SELECT device, MAX(threads), COUNT(*) AS k FROM costs GROUP BY device "
                  "ORDER BY (device = ?1) DESC, k DESC LIMIT 1";
  if (sqlite3_prepare_v2(s, q, -1, &st, NULL) != SQLITE_OK)
    return util_sqlite_error(s, path, "read", err);
  sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC);
  int r = sqlite3_step(st);
  if (r == SQLITE_ROW) { /* a table made elsewhere may hold a NULL device: then this host */
    const char *d = (const char *)sqlite3_column_text(st, 0);
    snprintf(dev, n, "%s", d ? d : "");
    *threads = sqlite3_column_int(st, 1);
  }
  int rc = (r == SQLITE_ROW || r == SQLITE_DONE) ? GOPT_OK : util_sqlite_error(s, path, "read", err);
  sqlite3_finalize(st);
  if (!rc && !dev[0]) snprintf(dev, n, "%s", host);
  return rc;
}

/* Column i as seconds: a number >= 0 and finite (what the JSON loader accepts); -1 otherwise. */
static double row_seconds(sqlite3_stmt *st, int i) {
  int t = sqlite3_column_type(st, i);
  double v = sqlite3_column_double(st, i);
  return (t == SQLITE_INTEGER || t == SQLITE_FLOAT) && isfinite(v) && v >= 0 ? v : -1;
}

/* Reads the costs and steps rows of db's device. Rows are checked as the JSON loader checks its
 * entries (a table another program made may hold anything): a bad row fails with one line. */
static int read_rows(sqlite3 *s, const char *path, gopt_costdb *db, gopt_error *err) {
  sqlite3_stmt *st = NULL;
  int rc = GOPT_OK, r;
  const char *q = "SELECT sig, op, desc, seconds, reps FROM costs WHERE device = ?1 ORDER BY rowid";
  if (sqlite3_prepare_v2(s, q, -1, &st, NULL) != SQLITE_OK)
    return util_sqlite_error(s, path, "read", err);
  sqlite3_bind_text(st, 1, gopt_costdb_host(db), -1, SQLITE_STATIC);
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    const char *sig = (const char *)sqlite3_column_text(st, 0);
    char *end = NULL;
    unsigned long long v = sig ? strtoull(sig, &end, 16) : 0;
    if (!sig || *end || strlen(sig) != 16) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: costs row sig '%s' is not 16 hex digits", path,
                          sig ? sig : "(null)");
      break;
    }
    gopt_cost_entry e = {(uint64_t)v, (const char *)sqlite3_column_text(st, 1),
                         (const char *)sqlite3_column_text(st, 2), row_seconds(st, 3),
                         sqlite3_column_int(st, 4)};
    if (e.seconds < 0) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: costs row sig %s: seconds is not a number >= 0", path, sig);
      break;
    }
    if (gopt_costdb_put(db, &e)) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
      break;
    }
  }
  if (!rc && r != SQLITE_DONE) rc = util_sqlite_error(s, path, "read", err);
  sqlite3_finalize(st);
  if (rc) return rc;
  q = "SELECT model, seconds FROM steps WHERE device = ?1 ORDER BY rowid";
  if (sqlite3_prepare_v2(s, q, -1, &st, NULL) != SQLITE_OK)
    return util_sqlite_error(s, path, "read", err);
  sqlite3_bind_text(st, 1, gopt_costdb_host(db), -1, SQLITE_STATIC);
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    const char *model = (const char *)sqlite3_column_text(st, 0);
    double sec = row_seconds(st, 1);
    if (!model || sec < 0) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: steps row '%.80s': needs a model and seconds >= 0", path,
                          model ? model : "(null)");
      break;
    }
    if (gopt_costdb_put_step(db, model, sec)) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
      break;
    }
  }
  if (!rc && r != SQLITE_DONE) rc = util_sqlite_error(s, path, "read", err);
  sqlite3_finalize(st);
  return rc;
}

int costdb_sqlite_load(const char *path, gopt_costdb **out, gopt_error *err) {
  sqlite3 *s = NULL;
  gopt_costdb *db = NULL;
  char dev[512];
  int threads = 0;
  *out = NULL;
  int rc = util_sqlite_open(path, 0, schema, &s, err);
  if (rc) return rc;
  if ((rc = pick_device(s, path, dev, sizeof dev, &threads, err))) goto done;
  if (!(db = gopt_costdb_new(dev, threads))) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  if ((rc = read_rows(s, path, db, err))) goto done;
  *out = db;
  db = NULL;
done:
  gopt_costdb_free(db);
  sqlite3_close(s);
  return rc;
}

int costdb_sqlite_save(const gopt_costdb *db, const char *path, gopt_error *err) {
  sqlite3 *s = NULL;
  sqlite3_stmt *ce = NULL, *cs = NULL;
  int rc = util_sqlite_open(path, 1, schema, &s, err);
  if (rc) return rc;
  const char *qe = "INSERT INTO costs(sig, device, op, desc, seconds, reps, threads) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(sig, device) DO UPDATE SET "
                   "op = excluded.op, desc = excluded.desc, seconds = excluded.seconds, "
                   "reps = excluded.reps, threads = excluded.threads, updated = CURRENT_TIMESTAMP";
  const char *qs = "INSERT INTO steps(model, device, seconds) VALUES(?1, ?2, ?3) "
                   "ON CONFLICT(model, device) DO UPDATE SET seconds = excluded.seconds";
  if (util_sqlite_exec(s, "BEGIN IMMEDIATE") != SQLITE_OK) {
    rc = util_sqlite_error(s, path, "write", err);
    goto done;
  }
  if (sqlite3_prepare_v2(s, qe, -1, &ce, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s, qs, -1, &cs, NULL) != SQLITE_OK)
    goto fail;
  for (size_t i = 0; i < gopt_costdb_size(db); i++) {
    const gopt_cost_entry *e = gopt_costdb_at(db, i);
    char sig[17];
    snprintf(sig, sizeof sig, "%016llx", (unsigned long long)e->sig);
    sqlite3_reset(ce);
    sqlite3_bind_text(ce, 1, sig, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(ce, 2, gopt_costdb_host(db), -1, SQLITE_STATIC);
    sqlite3_bind_text(ce, 3, e->op, -1, SQLITE_STATIC);
    sqlite3_bind_text(ce, 4, e->desc, -1, SQLITE_STATIC);
    sqlite3_bind_double(ce, 5, e->seconds);
    sqlite3_bind_int(ce, 6, e->reps);
    sqlite3_bind_int(ce, 7, gopt_costdb_threads(db));
    if (sqlite3_step(ce) != SQLITE_DONE) goto fail;
  }
  for (size_t i = 0; i < costdb_step_count(db); i++) {
    const char *model;
    double sec;
    costdb_step_at(db, i, &model, &sec);
    sqlite3_reset(cs);
    sqlite3_bind_text(cs, 1, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(cs, 2, gopt_costdb_host(db), -1, SQLITE_STATIC);
    sqlite3_bind_double(cs, 3, sec);
    if (sqlite3_step(cs) != SQLITE_DONE) goto fail;
  }
  if (sqlite3_exec(s, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) goto done;
fail:
  rc = util_sqlite_error(s, path, "write", err);
  sqlite3_exec(s, "ROLLBACK", NULL, NULL, NULL);
done:
  sqlite3_finalize(ce);
  sqlite3_finalize(cs);
  sqlite3_close(s);
  return rc;
}

int costdb_sqlite_count(const char *path, long *entries, long *devices, gopt_error *err) {
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  int rc = util_sqlite_open(path, 0, schema, &s, err);
  if (rc) return rc;
  if (sqlite3_prepare_v2(s, "SELECT COUNT(*), COUNT(DISTINCT device) FROM costs", -1, &st, NULL) !=
          SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW) {
    rc = util_sqlite_error(s, path, "read", err);
  } else {
    *entries = (long)sqlite3_column_int64(st, 0);
    *devices = (long)sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  sqlite3_close(s);
  return rc;
}
