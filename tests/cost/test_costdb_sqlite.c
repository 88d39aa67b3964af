/* test_costdb_sqlite.c: the SQLite measured-cost database and run history: 2 processes x N
 * concurrent single-entry saves give 2N rows (counted with SQLite itself); a JSON database
 * round-trips through SQLite; a corrupted file and a locked database fail with one line and
 * leave the earlier content as it was; history records add up, list per model and the best
 * decisions are the feasible lowest objective. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cost/cost_internal.h"
#include "gopt/costdb.h"
#include "gopt/history.h"
#include "gopt/util.h"

#define N_EACH 150

/* Writer `who`: N_EACH saves, each of a fresh one-entry database (one transaction each). */
static int writer(const char *path, int who) {
  for (int i = 0; i < N_EACH; i++) {
    gopt_costdb *db = gopt_costdb_new("test-host", 1);
    gopt_cost_entry e = {((uint64_t)who << 32) | (uint64_t)i, "Relu", "Relu f32[2]", 1e-6 * (i + 1), 3};
    gopt_error err = {0};
    if (!db || gopt_costdb_put(db, &e) || gopt_costdb_save(db, path, &err)) {
      fprintf(stderr, "writer %d: %s\n", who, err.msg);
      return 1;
    }
    gopt_costdb_free(db);
  }
  return 0;
}

static long rows(const char *path, const char *sql) {
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  long n = -1;
  if (sqlite3_open_v2(path, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(s, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = (long)sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(s);
  return n;
}

static void concurrent(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/c.sqlite", dir);
  pid_t pid[2];
  for (int w = 0; w < 2; w++) {
    pid[w] = fork();
    CHECK(pid[w] >= 0);
    if (pid[w] == 0) _exit(writer(path, w + 1));
  }
  for (int w = 0; w < 2; w++) {
    int st = 0;
    CHECK(waitpid(pid[w], &st, 0) == pid[w]);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", w);
  }
  long n = rows(path, "SELECT COUNT(*) FROM costs");
  CHECK_MSG(n == 2 * N_EACH, "%ld rows, expected %d", n, 2 * N_EACH);
  long e = 0, d = 0;
  gopt_error err = {0};
  CHECK_EQ_INT(costdb_sqlite_count(path, &e, &d, &err), 0);
  CHECK(e == 2 * N_EACH && d == 1);
  gopt_costdb *db = NULL;
  CHECK_EQ_INT(gopt_costdb_load(path, &db, &err), 0);
  CHECK(gopt_costdb_size(db) == 2 * N_EACH);
  gopt_cost_entry x;
  CHECK(gopt_costdb_get(db, (2ULL << 32) | 7, &x) && x.seconds == 8e-6 && x.reps == 3);
  gopt_costdb_free(db);
}

static void roundtrip(const char *dir) {
  char js[512], sq[512], js2[512];
  snprintf(js, sizeof js, "%s/a.json", dir);
  snprintf(sq, sizeof sq, "%s/a.sqlite", dir);
  snprintf(js2, sizeof js2, "%s/b.json", dir);
  gopt_error err = {0};
  gopt_costdb *db = gopt_costdb_new("host-a", 4), *b = NULL, *c = NULL;
  for (int i = 0; i < 50; i++) {
    gopt_cost_entry e = {(uint64_t)i * 0x9e3779b97f4a7c15ULL, "Conv", "Conv f32[1,3]", 1e-5 * i, 16};
    CHECK_EQ_INT(gopt_costdb_put(db, &e), 0);
  }
  CHECK_EQ_INT(gopt_costdb_put_step(db, "m.onnx", 0.25), 0);
  CHECK_EQ_INT(gopt_costdb_save(db, js, &err), 0);
  CHECK_EQ_INT(gopt_costdb_load(js, &b, &err), 0);
  CHECK_EQ_INT(gopt_costdb_save(b, sq, &err), 0);
  CHECK_EQ_INT(gopt_costdb_load(sq, &c, &err), 0);
  CHECK(!strcmp(gopt_costdb_host(c), "host-a") && gopt_costdb_threads(c) == 4);
  CHECK(gopt_costdb_size(c) == 50 && gopt_costdb_step(c, "m.onnx") == 0.25);
  for (size_t i = 0; i < 50; i++) {
    const gopt_cost_entry *a = gopt_costdb_at(db, i);
    gopt_cost_entry y;
    CHECK(gopt_costdb_get(c, a->sig, &y) && y.seconds == a->seconds && !strcmp(y.op, "Conv"));
  }
  CHECK_EQ_INT(gopt_costdb_save(c, js2, &err), 0);
  void *t1, *t2;
  size_t n1, n2;
  CHECK_EQ_INT(gopt_file_read(js, &t1, &n1, &err), 0);
  CHECK_EQ_INT(gopt_file_read(js2, &t2, &n2, &err), 0);
  CHECK_MSG(n1 == n2 && !memcmp(t1, t2, n1), "JSON -> SQLite -> JSON changed the file");
  free(t1);
  free(t2);
  gopt_costdb_free(db);
  gopt_costdb_free(b);
  gopt_costdb_free(c);
}

/* A file that is not a database: load and save fail with one line, the file stays as it was. */
static void corrupted(const char *dir) {
  char p[512];
  snprintf(p, sizeof p, "%s/bad.sqlite", dir);
  const char junk[] = "this is not a database, but it is 100 bytes long so SQLite reads a header.......................\n";
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_file_write_atomic(p, junk, sizeof junk - 1, &err), 0);
  gopt_costdb *db = NULL;
  CHECK(gopt_costdb_load(p, &db, &err) < 0 && !db);
  CHECK_MSG(strstr(err.msg, "bad.sqlite") && strstr(err.msg, "not a SQLite database") && !strchr(err.msg, '\n'),
            "%s", err.msg);
  db = gopt_costdb_new("h", 1);
  gopt_cost_entry e = {1, "Relu", "", 1e-6, 1};
  gopt_costdb_put(db, &e);
  CHECK(gopt_costdb_save(db, p, &err) < 0);
  gopt_history_record r = {.model_hash = 1, .command = "optimize", .task = "placement", .cluster = "c"};
  CHECK(gopt_history_add(p, &r, &err) < 0 && strstr(err.msg, "not a SQLite database"));
  void *t;
  size_t n;
  CHECK_EQ_INT(gopt_file_read(p, &t, &n, &err), 0);
  CHECK(n == sizeof junk - 1 && !memcmp(t, junk, n));
  free(t);
  gopt_costdb_free(db);
}

static int count_fn(const gopt_history_record *r, void *user) {
  (void)r;
  (*(int *)user)++;
  return 0;
}

/* History: records add up; a writer locked out fails with one line and loses nothing; best. */
static void history(const char *dir) {
  char p[512];
  snprintf(p, sizeof p, "%s/h.sqlite", dir);
  gopt_error err = {0};
  const char *dec[3] = {"{\"placement\": {\"a\": 1}}", "{\"placement\": {\"a\": 0}}", "{\"placement\": {}}"};
  double obj[3] = {2.0, 1.0, 0.5};
  int feas[3] = {1, 1, 0};
  for (int i = 0; i < 3; i++) {
    gopt_history_record r = {.model_hash = 42, .model = "m", .command = "optimize", .task = "placement",
                             .cluster = "2xV100", .method = i == 1 ? "anneal" : "local", .objective = obj[i],
                             .feasible = feas[i], .evaluations = 10, .decisions = dec[i]};
    CHECK_EQ_INT(gopt_history_add(p, &r, &err), 0);
  }
  gopt_history_record other = {.model_hash = 43, .command = "compare", .task = "placement", .cluster = "2xV100"};
  CHECK_EQ_INT(gopt_history_add(p, &other, &err), 0);
  int n = 0;
  CHECK_EQ_INT(gopt_history_list(p, 42, count_fn, &n, &err), 0);
  CHECK(n == 3);
  char *d = NULL, m[32];
  CHECK_EQ_INT(gopt_history_best(p, 42, "2xV100", "placement", &d, m, sizeof m, &err), 1);
  CHECK_MSG(!strcmp(d, dec[1]) && !strcmp(m, "anneal"), "best %s by %s", d, m); /* feasible first */
  free(d);
  CHECK_EQ_INT(gopt_history_best(p, 42, "4xV100", "placement", &d, NULL, 0, &err), 0);
  /* locked: another connection holds the write lock */
  sqlite3 *s = NULL;
  CHECK(sqlite3_open(p, &s) == SQLITE_OK && sqlite3_exec(s, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK);
  setenv("GOPT_SQLITE_BUSY_MS", "50", 1);
  CHECK(gopt_history_add(p, &other, &err) < 0);
  CHECK_MSG(strstr(err.msg, "locked") && !strchr(err.msg, '\n'), "%s", err.msg);
  unsetenv("GOPT_SQLITE_BUSY_MS");
  sqlite3_exec(s, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(s);
  n = 0;
  CHECK_EQ_INT(gopt_history_list(p, 0, count_fn, &n, &err), 0);
  CHECK(n == 4);
  CHECK_EQ_INT(gopt_history_add(p, &other, &err), 0);
  n = 0;
  CHECK_EQ_INT(gopt_history_list(p, 0, count_fn, &n, &err), 0);
  CHECK(n == 5);
}

int main(void) {
  char dir[] = "/tmp/gopt_sqlite_XXXXXX";
  CHECK(mkdtemp(dir));
  concurrent(dir);
  roundtrip(dir);
  corrupted(dir);
  history(dir);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  return check_exit("test_costdb_sqlite");
}
