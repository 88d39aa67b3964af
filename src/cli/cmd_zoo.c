/* cmd_zoo.c: `gopt zoo`: lists the built-in models with their size knobs. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/zoo.h"

static const char zoo_help[] =
    "usage: gopt zoo [--json] [--nodes SPEC]\n"
    "  lists the built-in models and their knobs; use a model as MODEL in any command:\n"
    "  gopt info gnmt:layers=8,steps=100\n"
    "  --nodes SPEC   print the node count SPEC would build, without building it\n";

int cli_zoo(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(zoo_help, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--nodes")) {
      if (i + 1 >= argc) return cli_usage_error("zoo", "--nodes needs a SPEC");
      size_t n = 0;
      gopt_error err = {0};
      if (gopt_zoo_node_count(argv[++i], &n, &err)) {
        fprintf(stderr, "gopt zoo: %s\n", err.msg);
        return 1;
      }
      printf("%zu\n", n);
      return 0;
    } else {
      return cli_usage_error("zoo", "unknown argument '%s' (see gopt zoo --help)", argv[i]);
    }
  }
  if (json) {
    json_t *arr = json_array();
    for (size_t i = 0; i < gopt_zoo_count(); i++) {
      const gopt_zoo_model *m = gopt_zoo_get(i);
      json_t *o = json_object(), *ks = json_array();
      json_object_set_new(o, "name", json_string(m->name));
      json_object_set_new(o, "description", json_string(m->description));
      for (size_t k = 0; k < m->n_knobs; k++) {
        json_t *e = json_object();
        json_object_set_new(e, "name", json_string(m->knobs[k].name));
        json_object_set_new(e, "default", json_integer(m->knobs[k].dflt));
        json_object_set_new(e, "min", json_integer(m->knobs[k].min));
        json_object_set_new(e, "max", json_integer(m->knobs[k].max));
        json_object_set_new(e, "description", json_string(m->knobs[k].description));
        json_array_append_new(ks, e);
      }
      json_object_set_new(o, "knobs", ks);
      size_t n = 0;
      if (gopt_zoo_node_count(m->name, &n, NULL) == 0)
        json_object_set_new(o, "default_nodes", json_integer((json_int_t)n));
      json_array_append_new(arr, o);
    }
    json_dumpf(arr, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(arr);
    return 0;
  }
  printf("%-16s %10s  %s\n", "model", "nodes", "description");
  for (size_t i = 0; i < gopt_zoo_count(); i++) {
    const gopt_zoo_model *m = gopt_zoo_get(i);
    size_t n = 0;
    gopt_zoo_node_count(m->name, &n, NULL);
    printf("%-16s %10zu  %s\n", m->name, n, m->description);
    for (size_t k = 0; k < m->n_knobs; k++)
      printf("  %-14s default %-8lld [%lld..%lld]  %s\n", m->knobs[k].name,
             (long long)m->knobs[k].dflt, (long long)m->knobs[k].min, (long long)m->knobs[k].max,
             m->knobs[k].description);
  }
  printf("\nuse as MODEL: gopt info NAME:knob=value,knob=value\n");
  return 0;
}
