/* util_sqlite.c: opening gopt's SQLite databases (util_sqlite.h): WAL, busy timeout, schema,
 * one-line errors. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/util_sqlite.h"

int util_sqlite_is_path(const char *path) {
  size_t n = path ? strlen(path) : 0;
  const char *ext[] = {".sqlite", ".sqlite3", ".db"};
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
    size_t k = strlen(ext[i]);
    if (n > k && !strcmp(path + n - k, ext[i])) return 1;
  }
  return 0;
}

int util_sqlite_busy_ms(void) {
  const char *v = getenv("GOPT_SQLITE_BUSY_MS");
  long ms = v && *v ? strtol(v, NULL, 10) : UTIL_SQLITE_BUSY_MS;
  return ms >= 0 && ms <= 3600000 ? (int)ms : UTIL_SQLITE_BUSY_MS;
}

int util_sqlite_error(sqlite3 *db, const char *path, const char *what, gopt_error *err) {
  int code = db ? sqlite3_errcode(db) : SQLITE_CANTOPEN;
  const char *msg = db ? sqlite3_errmsg(db) : "cannot open";
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
    return gopt_error_set(err, GOPT_EIO, "%s: %s: database is locked by another process (waited %d ms)",
                          path, what, util_sqlite_busy_ms());
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
    return gopt_error_set(err, GOPT_EPARSE, "%s: %s: not a SQLite database or corrupted (%s)", path,
                          what, msg);
  return gopt_error_set(err, GOPT_EIO, "%s: %s: %s", path, what, msg);
}

/* Runs sql, retrying while another process holds a lock it cannot wait for. SQLite does not call
 * the busy handler when waiting could deadlock: two processes that create the same new database
 * at once both hold a read lock while switching it to WAL or creating its tables, and one gets
 * SQLITE_BUSY at once. Retrying from scratch (the read lock released) up to the busy timeout is
 * what the handler would have done. */
int util_sqlite_exec(sqlite3 *db, const char *sql) {
  struct timespec t0, now, nap = {0, 2000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    int code = rc & 0xff;
    if (code != SQLITE_BUSY && code != SQLITE_LOCKED) return rc;
    if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t0.tv_nsec) / 1e6;
    if (ms >= util_sqlite_busy_ms()) return rc;
    nanosleep(&nap, NULL);
  }
}

int util_sqlite_open(const char *path, int create, const char *schema, sqlite3 **out,
                     gopt_error *err) {
  sqlite3 *db = NULL;
  *out = NULL;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
    int rc = db ? util_sqlite_error(db, path, "open", err)
                : gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    sqlite3_close(db);
    return rc;
  }
  sqlite3_busy_timeout(db, util_sqlite_busy_ms());
  /* journal_mode reads the header: a file that is not a database fails here. */
  if (util_sqlite_exec(db, "PRAGMA journal_mode=WAL") != SQLITE_OK ||
      (schema && util_sqlite_exec(db, schema) != SQLITE_OK)) {
    int rc = util_sqlite_error(db, path, "open", err);
    sqlite3_close(db);
    return rc;
  }
  *out = db;
  return GOPT_OK;
}
