/* gopt/history.h: the run history: one SQLite record per optimize, compare (one per method),
 * train, rewrite or passes run, in $XDG_DATA_HOME/gopt/history.sqlite (default
 * ~/.local/share/gopt/history.sqlite). GOPT_HISTORY=0 switches recording off. Records are only
 * ever added (WAL, busy timeout: several processes may record at once); a corrupted or locked
 * database fails with one line and the earlier records stay as they were. `gopt history` lists
 * them; the search start "history" (search.h) starts from the best decisions recorded for the
 * same model (structural hash), cluster and task. */
#ifndef GOPT_HISTORY_H
#define GOPT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gopt_history_record {
  int64_t id;             /* set by the database (list) */
  const char *time;       /* UTC "YYYY-MM-DD HH:MM:SS" (list; set by the database on add) */
  uint64_t model_hash;    /* gopt_graph_hash of the model */
  const char *model;      /* the model as given (path or zoo spec) */
  const char *command;    /* optimize, compare, train, ... */
  const char *task;       /* task name */
  const char *cluster;    /* cluster name (gopt_cluster.name) */
  const char *method;
  uint64_t seed;
  double objective;       /* the task's objective (seconds or bytes, penalty included) */
  int feasible;
  uint64_t evaluations;
  double seconds;         /* wall time of the method */
  const char *decisions;  /* decisions JSON text (gopt_decisions_dumps), may be NULL */
  const char *decisions_file; /* where -o wrote them, may be NULL */
  const char *version;    /* gopt version (add: NULL = this build's, gopt_version()) */
} gopt_history_record;

/* The history database's path into buf: $GOPT_HISTORY_FILE, else $XDG_DATA_HOME/gopt/
 * history.sqlite, else $HOME/.local/share/gopt/history.sqlite. Fails when neither is set. */
int gopt_history_path(char *buf, size_t len, gopt_error *err);
/* 0 when GOPT_HISTORY is "0", "off" or "no"; 1 otherwise. */
int gopt_history_enabled(void);
/* Adds r to the database at path (NULL: gopt_history_path), creating it and its folder. */
int gopt_history_add(const char *path, const gopt_history_record *r, gopt_error *err);
/* Calls fn for every record, oldest first; model_hash 0 lists all models. fn returning non-zero
 * stops the listing. A missing database lists nothing. */
typedef int (*gopt_history_fn)(const gopt_history_record *r, void *user);
int gopt_history_list(const char *path, uint64_t model_hash, gopt_history_fn fn, void *user,
                      gopt_error *err);
/* The best recorded decisions for (model_hash, cluster, task): feasible first, then the lowest
 * objective. Returns 1 and a malloc'd copy of the decisions text in *decisions (and the record's
 * method into method, when not NULL), 0 when none is recorded, or a negative error. */
int gopt_history_best(const char *path, uint64_t model_hash, const char *cluster, const char *task,
                      char **decisions, char *method, size_t method_len, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
