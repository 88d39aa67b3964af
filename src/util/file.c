/* file.c: whole-file reads, atomic writes (temporary file + fsync + rename), time and memory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gopt/util.h"

int gopt_file_read(const char *path, void **buf, size_t *len, gopt_error *err) {
  int rc = GOPT_OK;
  char *data = NULL;
  FILE *f = fopen(path, "rb");
  *buf = NULL;
  *len = 0;
  if (!f) return gopt_error_set(err, GOPT_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = gopt_error_set(err, GOPT_EIO, "%s: not a regular file", path);
    goto done;
  }
  size_t n = (size_t)st.st_size;
  data = malloc(n + 1);
  if (!data) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory reading %zu bytes", path, n);
    goto done;
  }
  if (n && fread(data, 1, n, f) != n) {
    rc = gopt_error_set(err, GOPT_EIO, "%s: short read", path);
    goto done;
  }
  data[n] = 0;
  *buf = data;
  *len = n;
  data = NULL;
done:
  free(data);
  fclose(f);
  return rc;
}

int gopt_file_write_atomic(const char *path, const void *buf, size_t len, gopt_error *err) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  int rc = GOPT_OK, fd = -1;
  if (!tmp) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    rc = gopt_error_set(err, GOPT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    goto done;
  }
  const char *p = buf;
  size_t left = len;
  while (left) {
    ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      rc = gopt_error_set(err, GOPT_EIO, "%s: write failed: %s", tmp, strerror(errno));
      goto done;
    }
    p += w;
    left -= (size_t)w;
  }
  if (fsync(fd) != 0 && errno != EINVAL) {
    rc = gopt_error_set(err, GOPT_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
    goto done;
  }
  if (close(fd) != 0) {
    fd = -1;
    rc = gopt_error_set(err, GOPT_EIO, "%s: close failed: %s", tmp, strerror(errno));
    goto done;
  }
  fd = -1;
  if (rename(tmp, path) != 0)
    rc = gopt_error_set(err, GOPT_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
done:
  if (fd >= 0) close(fd);
  if (rc != GOPT_OK) unlink(tmp);
  free(tmp);
  return rc;
}

uint64_t gopt_hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *s = p;
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

double gopt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double gopt_median(double *v, size_t n) {
  if (!n) return NAN;
  qsort(v, n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

size_t gopt_peak_rss(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}
