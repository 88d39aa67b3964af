/* strtab.h: interned-string table used by the graph IR (internal). Strings live in one growing
 * char buffer; ids index an offset array; an open-addressing hash maps text to id. Id 0 = "". */
#ifndef GOPT_IR_STRTAB_H
#define GOPT_IR_STRTAB_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/graph.h"

struct gopt_strtab {
  char *chars;
  size_t nchars, capchars;
  uint32_t *offs;     /* id -> offset in chars */
  uint32_t *lens;     /* id -> length */
  size_t n, cap;
  uint32_t *slots;    /* hash slots: id + 1, 0 = empty */
  size_t nslots;      /* power of two */
};

gopt_strtab *strtab_new(void);
void strtab_free(gopt_strtab *t);
gopt_strtab *strtab_clone(const gopt_strtab *t);
/* Interns s[0..len); returns its id, or UINT32_MAX when memory runs out. */
uint32_t strtab_intern(gopt_strtab *t, const char *s, size_t len);
/* Id of s if interned, UINT32_MAX when not. */
uint32_t strtab_find(const gopt_strtab *t, const char *s, size_t len);
static inline const char *strtab_get(const gopt_strtab *t, uint32_t id) {
  return id < t->n ? t->chars + t->offs[id] : "";
}
size_t strtab_memory(const gopt_strtab *t);

#endif
