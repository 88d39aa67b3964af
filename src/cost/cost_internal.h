/* cost_internal.h: the measured-cost database's internal pieces shared by its JSON (costdb.c) and
 * SQLite (costdb_sqlite.c) storage. */
#ifndef GOPT_COST_INTERNAL_H
#define GOPT_COST_INTERNAL_H

#include "gopt/costdb.h"

/* Recorded end-to-end steps: how many, and step i. */
size_t costdb_step_count(const gopt_costdb *db);
void costdb_step_at(const gopt_costdb *db, size_t i, const char **model, double *seconds);
/* SQLite storage (a path ending .sqlite/.sqlite3/.db): load reads the rows of one device (this
 * host's when it has any, else the device with the most rows); save upserts every entry and step
 * under db's host in one transaction and never deletes a row. */
int costdb_sqlite_load(const char *path, gopt_costdb **out, gopt_error *err);
int costdb_sqlite_save(const gopt_costdb *db, const char *path, gopt_error *err);
/* Row counts of a SQLite cost database (all devices): entries, and the distinct devices. */
int costdb_sqlite_count(const char *path, long *entries, long *devices, gopt_error *err);
#endif
