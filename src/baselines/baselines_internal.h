/* baselines_internal.h: the baseline components (placement.c, expert.c, schedule.c) as functions
 * that set the variables of their kinds in x, which holds the decisions so far (see baselines.h). */
#ifndef GOPT_BASELINES_INTERNAL_H
#define GOPT_BASELINES_INTERNAL_H

#include "gopt/baselines.h"
#include "task/task_internal.h"

/* Each writes a device per position into dev (placement) or a priority per position into prio
 * (schedule); m_etf writes both. x holds the decisions made so far. */
int bl_single(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err);
int bl_round_robin(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err);
int bl_metis(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err);
int bl_expert(const gopt_env *e, const double *x, int32_t *dev, gopt_error *err);
int bl_m_etf(const gopt_env *e, const double *x, int32_t *dev, double *prio, gopt_error *err);

int bl_bfs(const gopt_env *e, const double *x, double *prio, gopt_error *err);
int bl_dfs(const gopt_env *e, const double *x, double *prio, gopt_error *err);
int bl_critical_path(const gopt_env *e, const double *x, double *prio, gopt_error *err);
int bl_mem_greedy(const gopt_env *e, const double *x, double *prio, gopt_error *err);

#endif
