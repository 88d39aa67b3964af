/* strtab.c: interned strings for the graph IR (see strtab.h). */
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "ir/strtab.h"

static int strtab_rehash(gopt_strtab *t, size_t nslots) {
  uint32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots) return -1;
  for (uint32_t id = 0; id < t->n; id++) {
    uint64_t h = gopt_hash_bytes(t->chars + t->offs[id], t->lens[id], 0);
    size_t i = (size_t)h & (nslots - 1);
    while (slots[i]) i = (i + 1) & (nslots - 1);
    slots[i] = id + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = nslots;
  return 0;
}

gopt_strtab *strtab_new(void) {
  gopt_strtab *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (strtab_intern(t, "", 0) != 0) {
    strtab_free(t);
    return NULL;
  }
  return t;
}

void strtab_free(gopt_strtab *t) {
  if (!t) return;
  free(t->chars);
  free(t->offs);
  free(t->lens);
  free(t->slots);
  free(t);
}

gopt_strtab *strtab_clone(const gopt_strtab *t) {
  gopt_strtab *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  *c = *t;
  c->chars = malloc(t->capchars);
  c->offs = malloc(t->cap * sizeof *c->offs);
  c->lens = malloc(t->cap * sizeof *c->lens);
  c->slots = malloc(t->nslots * sizeof *c->slots);
  if (!c->chars || !c->offs || !c->lens || !c->slots) {
    strtab_free(c);
    return NULL;
  }
  memcpy(c->chars, t->chars, t->nchars);
  memcpy(c->offs, t->offs, t->n * sizeof *c->offs);
  memcpy(c->lens, t->lens, t->n * sizeof *c->lens);
  memcpy(c->slots, t->slots, t->nslots * sizeof *c->slots);
  return c;
}

uint32_t strtab_find(const gopt_strtab *t, const char *s, size_t len) {
  if (!t->nslots) return UINT32_MAX;
  uint64_t h = gopt_hash_bytes(s, len, 0);
  for (size_t i = (size_t)h & (t->nslots - 1);; i = (i + 1) & (t->nslots - 1)) {
    uint32_t v = t->slots[i];
    if (!v) return UINT32_MAX;
    uint32_t id = v - 1;
    if (t->lens[id] == len && memcmp(t->chars + t->offs[id], s, len) == 0) return id;
  }
}

uint32_t strtab_intern(gopt_strtab *t, const char *s, size_t len) {
  uint32_t id = strtab_find(t, s, len);
  if (id != UINT32_MAX) return id;
  if (len >= UINT32_MAX / 2 || t->nchars + len + 1 >= UINT32_MAX) return UINT32_MAX;
  if (t->nchars + len + 1 > t->capchars) {
    size_t cap = t->capchars ? t->capchars * 2 : 4096;
    while (cap < t->nchars + len + 1) cap *= 2;
    char *c = realloc(t->chars, cap);
    if (!c) return UINT32_MAX;
    t->chars = c;
    t->capchars = cap;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    uint32_t *o = realloc(t->offs, cap * sizeof *o);
    if (!o) return UINT32_MAX;
    t->offs = o;
    uint32_t *l = realloc(t->lens, cap * sizeof *l);
    if (!l) return UINT32_MAX;
    t->lens = l;
    t->cap = cap;
  }
  if ((t->n + 1) * 2 > t->nslots && strtab_rehash(t, t->nslots ? t->nslots * 2 : 512) != 0)
    return UINT32_MAX;
  id = (uint32_t)t->n++;
  t->offs[id] = (uint32_t)t->nchars;
  t->lens[id] = (uint32_t)len;
  if (len) memcpy(t->chars + t->nchars, s, len);
  t->chars[t->nchars + len] = 0;
  t->nchars += len + 1;
  uint64_t h = gopt_hash_bytes(s, len, 0);
  size_t i = (size_t)h & (t->nslots - 1);
  while (t->slots[i]) i = (i + 1) & (t->nslots - 1);
  t->slots[i] = id + 1;
  return id;
}

size_t strtab_memory(const gopt_strtab *t) {
  return sizeof *t + t->capchars + t->cap * 2 * sizeof(uint32_t) + t->nslots * sizeof(uint32_t);
}
