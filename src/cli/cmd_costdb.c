/* cmd_costdb.c: `gopt costdb import|export|info`: moves measured-cost databases between JSON and
 * SQLite (the format follows each path's extension, gopt/costdb.h) and summarises one. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/costdb.h"

static const char costdb_help[] =
    "usage: gopt costdb import IN OUT | export IN OUT | info DB\n"
    "  import/export copy every entry and measured step of IN into OUT, each stored as its\n"
    "  extension says (.sqlite, .sqlite3, .db: SQLite, keyed by op signature and device, safe for\n"
    "  several writers; anything else: JSON). Into SQLite rows are upserted, never deleted; a JSON\n"
    "  OUT is replaced atomically. info prints the host, thread count, entries and steps.\n";

int cli_costdb(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    fputs(costdb_help, stdout);
    return 0;
  }
  if (argc < 2) return cli_usage_error("costdb", "missing action (import, export, info; see gopt costdb --help)");
  const char *act = argv[1];
  int copy = !strcmp(act, "import") || !strcmp(act, "export");
  if (!copy && strcmp(act, "info"))
    return cli_usage_error("costdb", "unknown action '%s' (import, export, info)", act);
  if (argc != (copy ? 4 : 3))
    return cli_usage_error("costdb", copy ? "%s needs IN and OUT" : "%s needs DB", act);
  gopt_error err = {0};
  gopt_costdb *db = NULL;
  if (gopt_costdb_load(argv[2], &db, &err)) {
    fprintf(stderr, "gopt costdb: %s\n", err.msg);
    return 1;
  }
  int rc = 0;
  if (copy) {
    if (gopt_costdb_save(db, argv[3], &err)) {
      fprintf(stderr, "gopt costdb: %s\n", err.msg);
      rc = 1;
    } else {
      printf("%s: %zu entries of host '%s' written to %s\n", act, gopt_costdb_size(db), gopt_costdb_host(db),
             argv[3]);
    }
  } else {
    printf("%s: host '%s', %d threads, %zu entries\n", argv[2], gopt_costdb_host(db), gopt_costdb_threads(db),
           gopt_costdb_size(db));
  }
  gopt_costdb_free(db);
  return rc;
}
