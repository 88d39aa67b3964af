/* error.c: filling gopt_error, and the warning sink library code reports non-fatal problems to. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gopt/error.h"

int gopt_error_set(gopt_error *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* One line: a message never carries a newline. */
    for (char *p = err->msg; *p; p++)
      if (*p == '\n' || *p == '\r') *p = ' ';
  }
  return code;
}

void gopt_error_prefix(gopt_error *err, const char *fmt, ...) {
  if (!err) return;
  char pre[256], old[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  size_t k = strlen(pre);
  if (k >= sizeof err->msg) k = sizeof err->msg - 1;
  memcpy(err->msg, pre, k);
  size_t rest = strlen(old);
  if (k + rest >= sizeof err->msg) rest = sizeof err->msg - 1 - k;
  memcpy(err->msg + k, old, rest);
  err->msg[k + rest] = 0;
}

static gopt_warn_fn warn_fn;
static void *warn_user;

void gopt_set_warn_handler(gopt_warn_fn fn, void *user) {
  warn_fn = fn;
  warn_user = user;
}

void gopt_warn(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (warn_fn)
    warn_fn(buf, warn_user);
  else
    fprintf(stderr, "gopt: warning: %s\n", buf);
}

const char *gopt_error_name(int code) {
  switch (code) {
  case GOPT_OK: return "ok";
  case GOPT_EINVAL: return "invalid argument";
  case GOPT_ENOMEM: return "out of memory";
  case GOPT_EIO: return "i/o error";
  case GOPT_EPARSE: return "parse error";
  case GOPT_EGRAPH: return "invalid graph";
  case GOPT_ESHAPE: return "shape error";
  case GOPT_EUNSUP: return "unsupported";
  case GOPT_ERANGE: return "out of range";
  default: return "error";
  }
}
