/* shipped.c: finds the files gopt ships beside its binary (trained policies, rules/rules.json,
 * tools/ort/ort_run.js) for binaries run from the build tree, from an out-of-tree build, from an
 * install prefix, or copied elsewhere. CMake passes the source tree it was configured from
 * (GOPT_SOURCE_TREE) and the install prefix's data folder (GOPT_SHARE_DIR) to this file only. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gopt/util.h"

#ifndef GOPT_SOURCE_TREE
#define GOPT_SOURCE_TREE ""
#endif
#ifndef GOPT_SHARE_DIR
#define GOPT_SHARE_DIR ""
#endif

static int readable(const char *p) { return access(p, R_OK) == 0; }

/* The folder of the executable exe (NULL or no slash: /proc/self/exe) into dir; "" if unknown. */
static void exe_dir(const char *exe, char *dir, size_t n) {
  dir[0] = 0;
  if (exe && strchr(exe, '/')) {
    snprintf(dir, n, "%s", exe);
  } else {
    ssize_t k = readlink("/proc/self/exe", dir, n - 1);
    dir[k > 0 ? k : 0] = 0;
  }
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else dir[0] = 0;
}

int gopt_find_shipped(const char *rel, const char *exe, char *buf, size_t n) {
  char dir[1024];
  exe_dir(exe, dir, sizeof dir);
  /* next to the executable: BIN/rel, BIN/../rel (a prefix's bin/), BIN/../share/gopt/rel (an
   * install), BIN/../../rel (BUILD/bin inside the source tree) */
  const char *subs[] = {"", "/..", "/../share/gopt", "/../.."};
  for (int i = 0; dir[0] && i < 4; i++) {
    snprintf(buf, n, "%s%s/%s", dir, subs[i], rel);
    if (readable(buf)) return 1;
  }
  const char *roots[] = {GOPT_SOURCE_TREE, GOPT_SHARE_DIR};
  for (int i = 0; i < 2; i++) {
    if (!roots[i][0]) continue;
    snprintf(buf, n, "%s/%s", roots[i], rel);
    if (readable(buf)) return 1;
  }
  if (n) buf[0] = 0;
  return 0;
}

const char *gopt_shipped_places(void) {
  return "next to the executable, in the source tree " GOPT_SOURCE_TREE " or in " GOPT_SHARE_DIR;
}
