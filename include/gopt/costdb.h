/* gopt/costdb.h: the measured-cost database: per-op run times keyed by op signature.
 *
 * The executor (`gopt run --profile`) measures each distinct op signature once (warm-ups, then
 * the median of timed runs) and stores it here; the cost model reads it (`--costs measured|auto`).
 * A signature covers the op type, its attributes, and every input's and output's dtype and shape,
 * so ops with equal signatures cost the same on one host. The file is JSON:
 *   {"format":"gopt-costdb","version":1,"host":"...","threads":N,
 *    "entries":[{"sig":"16 hex digits","op":"Conv","desc":"...","seconds":1.2e-4,"reps":32},...],
 *    "steps":[{"model":"corpus/resnet18.onnx","seconds":0.0123},...]}
 * and is written atomically. "steps" holds measured end-to-end times of whole models (the
 * fidelity report compares them with simulated steps).
 * A path ending .sqlite, .sqlite3 or .db is a SQLite database instead (docs/COSTDB.md): rows keyed
 * by (op signature, device = host string), several processes may write at once (WAL, busy
 * timeout), saving upserts and never deletes, loading reads this host's rows (or the device with
 * the most rows when this host has none). */
#ifndef GOPT_COSTDB_H
#define GOPT_COSTDB_H

#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gopt_costdb gopt_costdb;

typedef struct gopt_cost_entry {
  uint64_t sig;
  const char *op;      /* op type */
  const char *desc;    /* human-readable signature, e.g. "Conv f32[1,64,56,56] f32[64,64,3,3] -> ..." */
  double seconds;      /* median time of one run */
  int reps;            /* timed runs behind the median */
} gopt_cost_entry;

/* Signature of node n: op type, attributes, input/output dtypes and shapes (names excluded). */
uint64_t gopt_op_signature(const gopt_graph *g, int32_t n);
/* Signature of a fused group (a loop of elementwise ops, or a Conv/MatMul with its post-op chain)
 * of nodes mem[0..n): independent of the members' order, so the executor's step (which profiles
 * it) and the simulator's fused unit (which looks it up) agree. Incrementally: acc = 0, then
 * gopt_group_sig_add(acc, gopt_op_signature(member)) per member, then gopt_group_sig_end(acc, n). */
uint64_t gopt_group_signature(const gopt_graph *g, const int32_t *mem, int n);
uint64_t gopt_group_sig_add(uint64_t acc, uint64_t op_sig);
uint64_t gopt_group_sig_end(uint64_t acc, int n);
/* The signature of a step the executor's layout pass runs reading or writing a oneDNN layout
 * (blocked, NHWC): sig tagged, so that a database keeps plain and blocked measurements of one op
 * apart (`gopt run --profile --layouts auto` writes these). */
uint64_t gopt_sig_blocked(uint64_t sig);
/* Writes a readable description of n's signature into buf (always NUL-terminated). */
void gopt_op_signature_desc(const gopt_graph *g, int32_t n, char *buf, size_t len);

/* New empty database for a host (a free-form identification string) and thread count. */
gopt_costdb *gopt_costdb_new(const char *host, int threads);
void gopt_costdb_free(gopt_costdb *db); /* accepts NULL */
/* Loads a database file (JSON, or SQLite by extension); a malformed, corrupted or locked file fails
 * with one line naming it and what is wrong. */
int gopt_costdb_load(const char *path, gopt_costdb **out, gopt_error *err);
int gopt_costdb_save(const gopt_costdb *db, const char *path, gopt_error *err);
/* Looks up sig: returns 1 and fills *e when present, 0 otherwise. */
int gopt_costdb_get(const gopt_costdb *db, uint64_t sig, gopt_cost_entry *e);
/* Looks up an op or group as the executor runs it by default: the blocked-layout entry
 * (gopt_sig_blocked) when the database has one, else the plain one. The simulator prices measured
 * devices this way, so a database profiled in the default layouts predicts the default run. */
int gopt_costdb_get_run(const gopt_costdb *db, uint64_t sig, gopt_cost_entry *e);
/* Inserts or replaces an entry (strings are copied). */
int gopt_costdb_put(gopt_costdb *db, const gopt_cost_entry *e);
size_t gopt_costdb_size(const gopt_costdb *db);
/* Entry i in insertion order (for iteration). */
const gopt_cost_entry *gopt_costdb_at(const gopt_costdb *db, size_t i);
const char *gopt_costdb_host(const gopt_costdb *db);
int gopt_costdb_threads(const gopt_costdb *db);
/* Records the measured end-to-end seconds of a model (replacing an earlier record). */
int gopt_costdb_put_step(gopt_costdb *db, const char *model, double seconds);
/* Measured end-to-end seconds of model, or -1 when none is recorded. */
double gopt_costdb_step(const gopt_costdb *db, const char *model);
/* This machine's identification: CPU model name and core count. */
void gopt_costdb_this_host(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
