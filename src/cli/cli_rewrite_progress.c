/* cli_rewrite_progress.c: `gopt rewrite`'s progress line on stderr (greedy, eqsat and rl searches)
 * and its Ctrl-C handling: the first Ctrl-C asks the search to stop and return its best graph so
 * far (which is then verified and written as usual), a second one ends the process. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/rewrite.h"
#include "gopt/util.h"

int cli_rewrite_progress_mode(void) {
  const char *env = getenv("GOPT_PROGRESS");
  if (env && !strcmp(env, "0")) return 0;
  if (env && !strcmp(env, "1")) return isatty(STDERR_FILENO) ? 1 : 2;
  return isatty(STDERR_FILENO) ? 1 : 0;
}

void cli_rewrite_progress(const gopt_rewrite_progress *p, void *user) {
  cli_rewrite_progress_state *s = user;
  double now = gopt_now();
  if (!s || !s->mode || (s->lines && now - s->last < (s->mode == 1 ? 0.2 : 2.0))) return;
  s->last = now;
  s->lines++;
  char what[160];
  if (!strcmp(p->method, "greedy"))
    snprintf(what, sizeof what, "%zu/%zu graphs dequeued, %zu generated, best %.4g ms (%.1f%% less)", p->step,
             p->steps, p->size, p->best_cost * 1e3,
             p->cost_before > 0 ? 100 * (1 - p->best_cost / p->cost_before) : 0.0);
  else if (!strcmp(p->method, "rl"))
    snprintf(what, sizeof what, "%zu/%zu rewrite steps, %zu candidates generated, best %.4g ms (%.1f%% less)",
             p->step, p->steps, p->size, p->best_cost * 1e3,
             p->cost_before > 0 ? 100 * (1 - p->best_cost / p->cost_before) : 0.0);
  else
    snprintf(what, sizeof what, "%s, iteration %zu/%zu, %zu e-nodes, %zu rewrites applied", p->phase, p->step,
             p->steps, p->size, p->applied);
  char lim[32] = "";
  if (p->seconds > 0) snprintf(lim, sizeof lim, " of %.0f", p->seconds);
  fprintf(stderr, "%sgopt rewrite: %s: %s  %.1f%s s%s", s->mode == 1 ? "\r" : "", p->method, what, p->elapsed,
          lim, s->mode == 1 ? "  (Ctrl-C: best so far)   " : "\n");
  fflush(stderr);
}

void cli_rewrite_progress_end(cli_rewrite_progress_state *s) {
  if (s->mode == 1 && s->lines) fputc('\n', stderr);
  s->lines = 0;
}

static void on_sigint(int sig) {
  (void)sig;
  gopt_rewrite_request_stop();
}

void cli_rewrite_sigint(int install) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = install ? on_sigint : SIG_DFL;
  sa.sa_flags = install ? (int)SA_RESETHAND : 0; /* a second Ctrl-C ends the process */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  if (install) gopt_rewrite_clear_stop();
}
