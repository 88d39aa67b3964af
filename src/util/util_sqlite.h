/* util_sqlite.h: the one way gopt opens its SQLite databases (the measured-cost database and the
 * run history): WAL journal and a busy timeout so several processes can write at once, the
 * schema created when missing, and SQLite's errors turned into one gopt_error line naming the
 * file. Library-internal. */
#ifndef GOPT_UTIL_SQLITE_H
#define GOPT_UTIL_SQLITE_H

#include <sqlite3.h>

#include "gopt/error.h"

/* Milliseconds a writer waits for another process's lock before failing with "locked"
 * (GOPT_SQLITE_BUSY_MS overrides it: tests of the locked case use a short wait). */
#define UTIL_SQLITE_BUSY_MS 10000
int util_sqlite_busy_ms(void);

/* Whether path names a SQLite database by its extension (.sqlite, .sqlite3, .db). */
int util_sqlite_is_path(const char *path);
/* Opens path (creating it, and its schema, when create is set; otherwise a missing file fails),
 * switches it to WAL with the busy timeout, checks it is a database and runs schema (SQL, may be
 * NULL). On failure *out is NULL and err holds "PATH: what" (corrupted, locked, unreadable). */
int util_sqlite_open(const char *path, int create, const char *schema, sqlite3 **out,
                     gopt_error *err);
/* sqlite3_exec, retried up to the busy timeout when SQLite returns BUSY without waiting (it does
 * not wait where waiting could deadlock, e.g. two processes creating one database). */
int util_sqlite_exec(sqlite3 *db, const char *sql);
/* Fills err with "PATH: WHAT: sqlite's message" and returns the gopt code for db's last error
 * (GOPT_EIO; locked or busy databases say so). */
int util_sqlite_error(sqlite3 *db, const char *path, const char *what, gopt_error *err);
#endif
