/* gopt/error.h: error codes and the one-line error message every fallible gopt call fills. */
#ifndef GOPT_ERROR_H
#define GOPT_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
  GOPT_OK = 0,
  GOPT_EINVAL = -1,   /* bad argument or flag */
  GOPT_ENOMEM = -2,   /* allocation failed */
  GOPT_EIO = -3,      /* file could not be read or written */
  GOPT_EPARSE = -4,   /* malformed input file */
  GOPT_EGRAPH = -5,   /* invalid graph: cycle, dangling input, duplicate name */
  GOPT_ESHAPE = -6,   /* shapes or dtypes inconsistent */
  GOPT_EUNSUP = -7,   /* unsupported op or feature */
  GOPT_ERANGE = -8    /* value out of range (too large, overflow) */
};

/* One message, one line: where (file, node, flag) and what is wrong. */
typedef struct gopt_error {
  int code;
  char msg[512];
} gopt_error;

/* Sets err (when non-NULL) to code and a printf-style message; returns code. */
int gopt_error_set(gopt_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefixes the existing message with a printf-style context ("model.onnx: "). */
void gopt_error_prefix(gopt_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Warning sink: library code reports non-fatal problems here (default: one line on stderr). */
typedef void (*gopt_warn_fn)(const char *msg, void *user);
void gopt_set_warn_handler(gopt_warn_fn fn, void *user);
void gopt_warn(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

const char *gopt_error_name(int code);

#ifdef __cplusplus
}
#endif
#endif
