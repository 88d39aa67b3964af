/* history.c: the run history in SQLite (gopt/history.h): path resolution, adding records,
 * listing them and finding the best decisions for a model, cluster and task. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "gopt/history.h"
#include "gopt/util.h"
#include "util/util_sqlite.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "time TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, model_hash TEXT NOT NULL, model TEXT, "
    "command TEXT, task TEXT, cluster TEXT, method TEXT, seed INTEGER, objective REAL, "
    "feasible INTEGER, evaluations INTEGER, seconds REAL, decisions TEXT, decisions_file TEXT, "
    "version TEXT);"
    "CREATE INDEX IF NOT EXISTS runs_key ON runs(model_hash, cluster, task);";

int gopt_history_enabled(void) {
  const char *v = getenv("GOPT_HISTORY");
  return !(v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no")));
}

int gopt_history_path(char *buf, size_t len, gopt_error *err) {
  const char *f = getenv("GOPT_HISTORY_FILE"), *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
  int n;
  if (f && *f) n = snprintf(buf, len, "%s", f);
  else if (x && *x == '/') n = snprintf(buf, len, "%s/gopt/history.sqlite", x);
  else if (h && *h) n = snprintf(buf, len, "%s/.local/share/gopt/history.sqlite", h);
  else return gopt_error_set(err, GOPT_EINVAL, "history: neither XDG_DATA_HOME nor HOME is set");
  if (n < 0 || (size_t)n >= len) return gopt_error_set(err, GOPT_ERANGE, "history: path too long");
  return GOPT_OK;
}

/* mkdir -p of path's folder. */
static int make_parent(const char *path, gopt_error *err) {
  char d[4096];
  snprintf(d, sizeof d, "%s", path);
  char *slash = strrchr(d, '/');
  if (!slash || slash == d) return GOPT_OK;
  *slash = 0;
  for (char *p = d + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(d, 0755) && errno != EEXIST) return gopt_error_set(err, GOPT_EIO, "%s: %s", d, strerror(errno));
    *p = '/';
  }
  if (mkdir(d, 0755) && errno != EEXIST) return gopt_error_set(err, GOPT_EIO, "%s: %s", d, strerror(errno));
  return GOPT_OK;
}

static int open_db(const char *path, int create, char *buf, size_t len, sqlite3 **s, gopt_error *err) {
  int rc;
  if (!path) {
    if ((rc = gopt_history_path(buf, len, err))) return rc;
    path = buf;
  } else if (path != buf) {
    snprintf(buf, len, "%s", path);
  }
  if (create && (rc = make_parent(path, err))) return rc;
  return util_sqlite_open(path, create, schema, s, err);
}

int gopt_history_add(const char *path, const gopt_history_record *r, gopt_error *err) {
  char p[4096], hash[17];
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  int rc = open_db(path, 1, p, sizeof p, &s, err);
  if (rc) return rc;
  const char *q = "INSERT INTO runs(model_hash, model, command, task, cluster, method, seed, "
                  "objective, feasible, evaluations, seconds, decisions, decisions_file, version) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->model_hash);
  if (sqlite3_prepare_v2(s, q, -1, &st, NULL) != SQLITE_OK) {
    rc = util_sqlite_error(s, p, "record", err);
    goto done;
  }
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, r->model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, r->command, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, r->task, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, r->cluster, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, r->method, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)r->seed);
  sqlite3_bind_double(st, 8, r->objective);
  sqlite3_bind_int(st, 9, r->feasible);
  sqlite3_bind_int64(st, 10, (sqlite3_int64)r->evaluations);
  sqlite3_bind_double(st, 11, r->seconds);
  sqlite3_bind_text(st, 12, r->decisions, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 13, r->decisions_file, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 14, r->version ? r->version : gopt_version(), -1, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE) rc = util_sqlite_error(s, p, "record", err);
done:
  sqlite3_finalize(st);
  sqlite3_close(s);
  return rc;
}

static const char *col(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }

int gopt_history_list(const char *path, uint64_t model_hash, gopt_history_fn fn, void *user,
                      gopt_error *err) {
  char p[4096], hash[17];
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  int rc = GOPT_OK, r;
  if (!path) {
    if ((rc = gopt_history_path(p, sizeof p, err))) return rc;
    path = p;
  }
  struct stat sb;
  if (stat(path, &sb)) return GOPT_OK; /* nothing recorded yet */
  if ((rc = open_db(path, 0, p, sizeof p, &s, err))) return rc;
  const char *q = "SELECT id, time, model_hash, model, command, task, cluster, method, seed, "
                  "objective, feasible, evaluations, seconds, decisions, decisions_file, version "
                  "FROM runs WHERE ?1 = '' OR model_hash = ?1 ORDER BY id";
  if (model_hash) snprintf(hash, sizeof hash, "%016llx", (unsigned long long)model_hash);
  else hash[0] = 0;
  if (sqlite3_prepare_v2(s, q, -1, &st, NULL) != SQLITE_OK) {
    rc = util_sqlite_error(s, p, "read", err);
    goto done;
  }
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    gopt_history_record h = {0};
    h.id = sqlite3_column_int64(st, 0);
    h.time = col(st, 1);
    h.model_hash = strtoull(col(st, 2) ? col(st, 2) : "0", NULL, 16);
    h.model = col(st, 3);
    h.command = col(st, 4);
    h.task = col(st, 5);
    h.cluster = col(st, 6);
    h.method = col(st, 7);
    h.seed = (uint64_t)sqlite3_column_int64(st, 8);
    h.objective = sqlite3_column_double(st, 9);
    h.feasible = sqlite3_column_int(st, 10);
    h.evaluations = (uint64_t)sqlite3_column_int64(st, 11);
    h.seconds = sqlite3_column_double(st, 12);
    h.decisions = col(st, 13);
    h.decisions_file = col(st, 14);
    h.version = col(st, 15);
    if (fn(&h, user)) break;
  }
  if (r != SQLITE_ROW && r != SQLITE_DONE) rc = util_sqlite_error(s, p, "read", err);
done:
  sqlite3_finalize(st);
  sqlite3_close(s);
  return rc;
}

int gopt_history_best(const char *path, uint64_t model_hash, const char *cluster, const char *task,
                      char **decisions, char *method, size_t method_len, gopt_error *err) {
  char p[4096], hash[17];
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  *decisions = NULL;
  int rc;
  if (!path) {
    if ((rc = gopt_history_path(p, sizeof p, err))) return rc;
    path = p;
  }
  struct stat sb;
  if (stat(path, &sb)) return 0;
  if ((rc = open_db(path, 0, p, sizeof p, &s, err))) return rc;
  const char *q = "SELECT decisions, method FROM runs WHERE model_hash = ?1 AND cluster = ?2 AND "
                  "task = ?3 AND decisions IS NOT NULL ORDER BY feasible DESC, objective ASC, id "
                  "LIMIT 1";
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)model_hash);
  if (sqlite3_prepare_v2(s, q, -1, &st, NULL) != SQLITE_OK) {
    rc = util_sqlite_error(s, p, "read", err);
    goto done;
  }
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, cluster, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, task, -1, SQLITE_STATIC);
  int r = sqlite3_step(st);
  if (r == SQLITE_ROW) {
    *decisions = strdup(col(st, 0));
    if (method && method_len) snprintf(method, method_len, "%s", col(st, 1) ? col(st, 1) : "");
    rc = *decisions ? 1 : gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", p);
  } else if (r != SQLITE_DONE) {
    rc = util_sqlite_error(s, p, "read", err);
  }
done:
  sqlite3_finalize(st);
  sqlite3_close(s);
  return rc;
}
