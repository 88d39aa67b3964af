/* cli_report.c: the sections of `gopt report`'s HTML page (cli_report.h) other than the graph:
 * style and script, model summary, methods table, zoomable per-device timelines of the best and
 * the default decisions, memory over time per device against its capacity, convergence curves
 * and the measured-cost fidelity. Everything is inline: the page loads nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_report.h"
#include "gopt/ops.h"
#include "gopt/util.h"

const char *const cli_report_palette[10] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                            "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

void cli_report_head(cli_sbuf *b, const char *title) {
  cli_sb_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
  cli_xml_text(b, title);
  cli_sb_printf(b, "</title>\n<style>\n"
                   "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1240px;color:#222}\n"
                   "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}\n"
                   "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}\n"
                   "td:first-child,th:first-child{text-align:left}tr.best td{font-weight:bold;background:#eef6ee}\n"
                   ".kv td{text-align:left}.note{color:#666;font-size:13px}.grid{display:flex;flex-wrap:wrap;gap:12px}\n"
                   "svg{font-family:system-ui,sans-serif}svg.tl{cursor:grab;user-select:none;display:block;margin:6px 0}\n"
                   "#graph .gv{max-height:900px;overflow:auto;border:1px solid #eee}#graph .gv svg{max-width:100%%;height:auto}\n"
                   ".zoom button{font-size:14px;min-width:34px;margin-right:4px}.legend span{display:inline-block;margin-right:12px;font-size:13px}\n"
                   ".sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}\n"
                   "</style></head><body>\n");
}

/* The timelines' zoom: every svg.tl shares one window [t0, t1] of seconds; the wheel zooms
 * around the pointer, a drag pans, the buttons zoom around the centre or reset. Kernels and
 * transfers are rects carrying data-s / data-e (seconds); the window is mirrored in each svg's
 * data-t0 / data-t1 (the browser test reads them). */
void cli_report_script(cli_sbuf *b) {
  cli_sb_printf(b, "%s",
    "<script>\n(function(){\n"
    "const svgs=[...document.querySelectorAll('svg.tl')];if(!svgs.length)return;\n"
    "const span=Math.max(...svgs.map(s=>+s.dataset.span));let t0=0,t1=span;\n"
    "function fmt(t){return +(t*1e3).toPrecision(4)+' ms'}\n"
    "function draw(){for(const s of svgs){const L=+s.dataset.left,W=+s.dataset.width,k=W/(t1-t0);\n"
    " for(const r of s.querySelectorAll('rect.k')){const a=+r.dataset.s,e=+r.dataset.e;\n"
    "  if(e<t0||a>t1){r.setAttribute('visibility','hidden');continue}r.setAttribute('visibility','visible');\n"
    "  const x0=L+(Math.max(a,t0)-t0)*k,x1=L+(Math.min(e,t1)-t0)*k;r.setAttribute('x',x0.toFixed(2));\n"
    "  r.setAttribute('width',Math.max(x1-x0,0.6).toFixed(2))}\n"
    " const g=s.querySelector('g.ticks');g.replaceChildren();const H=+s.dataset.height;\n"
    " const step=Math.pow(10,Math.floor(Math.log10((t1-t0)/5)));let u=step;if((t1-t0)/u>12)u*=5;else if((t1-t0)/u>6)u*=2;\n"
    " for(let t=Math.ceil(t0/u)*u;t<=t1;t+=u){const x=L+(t-t0)*k;\n"
    "  const l=document.createElementNS('http://www.w3.org/2000/svg','line');l.setAttribute('x1',x);l.setAttribute('x2',x);\n"
    "  l.setAttribute('y1',14);l.setAttribute('y2',H);l.setAttribute('stroke','#e4e4e4');g.appendChild(l);\n"
    "  const tx=document.createElementNS('http://www.w3.org/2000/svg','text');tx.setAttribute('x',x);tx.setAttribute('y',11);\n"
    "  tx.setAttribute('font-size','10');tx.setAttribute('text-anchor','middle');tx.textContent=fmt(t);g.appendChild(tx)}\n"
    " s.dataset.t0=t0;s.dataset.t1=t1}\n"
    " const w=document.getElementById('tl-window');if(w)w.textContent=fmt(t0)+' to '+fmt(t1)}\n"
    "function zoom(f,c){let a=c-(c-t0)*f,e=c+(t1-c)*f;const m=span*1e-6;if(e-a<m){a=c-m/2;e=c+m/2}\n"
    " if(a<0){e-=a;a=0}if(e>span){a-=e-span;e=span}t0=Math.max(0,a);t1=Math.min(span,e);draw()}\n"
    "function at(s,ev){const r=s.getBoundingClientRect(),L=+s.dataset.left,W=+s.dataset.width;\n"
    " const px=(ev.clientX-r.left)*(+s.getAttribute('width')/r.width);return t0+Math.min(Math.max(px-L,0),W)/W*(t1-t0)}\n"
    "let drag=null;\n"
    "for(const s of svgs){s.addEventListener('wheel',ev=>{ev.preventDefault();zoom(ev.deltaY<0?0.8:1.25,at(s,ev))},{passive:false});\n"
    " s.addEventListener('mousedown',ev=>{drag={s:s,x:ev.clientX,t0:t0,t1:t1};s.style.cursor='grabbing'})}\n"
    "window.addEventListener('mousemove',ev=>{if(!drag)return;const r=drag.s.getBoundingClientRect();\n"
    " const W=+drag.s.dataset.width*r.width/+drag.s.getAttribute('width');let d=-(ev.clientX-drag.x)/W*(drag.t1-drag.t0);\n"
    " d=Math.max(-drag.t0,Math.min(span-drag.t1,d));t0=drag.t0+d;t1=drag.t1+d;draw()});\n"
    "window.addEventListener('mouseup',()=>{if(drag)drag.s.style.cursor='';drag=null});\n"
    "for(const bt of document.querySelectorAll('[data-zoom]'))bt.addEventListener('click',()=>{const z=bt.dataset.zoom;\n"
    " if(z==='in')zoom(0.5,(t0+t1)/2);else if(z==='out')zoom(2,(t0+t1)/2);else{t0=0;t1=span;draw()}});\n"
    "draw();\n})();\n</script>\n");
}

static void human(cli_sbuf *b, double v, const char *unit) {
  const char *u[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (fabs(v) >= 1000 && i < 5) {
    v /= 1000;
    i++;
  }
  cli_sb_printf(b, i ? "%.2f %s%s" : "%.0f %s%s", v, u[i], unit);
}

void cli_report_summary(cli_sbuf *b, const cli_report_ctx *r) {
  gopt_graph_stats s;
  gopt_graph_stats_compute(r->g, &s);
  cli_sb_printf(b, "<section id=\"summary\"><h2>Model</h2>\n<table class=\"kv\">\n<tr><td>model</td><td>");
  cli_xml_text(b, r->f->model);
  cli_sb_printf(b, "</td></tr>\n<tr><td>structural hash</td><td>%016llx</td></tr>\n",
                (unsigned long long)gopt_graph_hash(r->g));
  cli_sb_printf(b, "<tr><td>nodes / edges</td><td>%zu / %zu</td></tr>\n", s.nodes, s.edges);
  cli_sb_printf(b, "<tr><td>parameters</td><td>");
  human(b, (double)s.params, "");
  cli_sb_printf(b, " (");
  human(b, (double)s.param_bytes, "B");
  cli_sb_printf(b, ")</td></tr>\n<tr><td>FLOPs per step</td><td>");
  human(b, s.flops, "FLOP");
  cli_sb_printf(b, "</td></tr>\n<tr><td>bytes moved by ops</td><td>");
  human(b, s.bytes, "B");
  cli_sb_printf(b, "</td></tr>\n<tr><td>task / cluster</td><td>");
  cli_xml_text(b, r->f->task);
  cli_sb_printf(b, " on ");
  cli_xml_text(b, r->c->name);
  cli_sb_printf(b, " (%d devices", r->c->n_devices);
  for (int d = 0; d < r->c->n_devices && d < 1; d++) {
    cli_sb_printf(b, " of ");
    cli_xml_text(b, r->c->devices[d].model);
    cli_sb_printf(b, ", ");
    human(b, r->c->devices[d].mem_bytes, "B");
  }
  cli_sb_printf(b, ")</td></tr>\n</table>\n<h3>Op mix</h3>\n<table><tr><th>op</th><th>count</th><th>FLOPs</th></tr>\n");
  cli_op_row *ops = NULL;
  size_t n = cli_info_ops(r->g, &ops);
  for (size_t i = 0; i < n && i < 15; i++) {
    cli_sb_printf(b, "<tr><td>");
    cli_xml_text(b, ops[i].type);
    cli_sb_printf(b, "</td><td>%zu</td><td>", ops[i].count);
    human(b, ops[i].flops, "");
    cli_sb_printf(b, "</td></tr>\n");
  }
  if (n > 15) cli_sb_printf(b, "<tr><td>%zu more op types</td><td></td><td></td></tr>\n", n - 15);
  free(ops);
  cli_sb_printf(b, "</table></section>\n");
}

void cli_report_methods(cli_sbuf *b, const cli_report_ctx *r) {
  const cli_cmp *m = r->m;
  char v[64];
  cli_sb_printf(b, "<section id=\"methods\"><h2>Methods compared</h2>\n<p class=\"note\">");
  if (m->budget) cli_sb_printf(b, "%llu evaluations per search method", (unsigned long long)m->budget);
  else cli_sb_printf(b, "%g s per search method", r->f->seconds);
  cli_sb_printf(b, ", seed %ld; ranked fitting in memory first, then by objective.</p>\n"
                   "<table><tr><th>method</th><th>kind</th><th>objective</th><th>vs default</th>"
                   "<th>step time</th><th>peak memory</th><th>fits</th><th>evaluations</th><th>time s</th><th>start</th></tr>\n",
                r->f->seed);
  cli_sb_printf(b, "<tr><td>default heuristic</td><td>-</td><td>%s</td><td>0.00%%</td><td>%.4f ms</td><td>",
                cli_task_fmt(r->task, m->rd.objective, v, sizeof v), m->rd.step_time * 1e3);
  human(b, m->rd.peak_mem, "B");
  cli_sb_printf(b, "</td><td>%s</td><td>1</td><td>-</td><td>-</td></tr>\n", m->rd.feasible ? "yes" : "NO");
  for (size_t i = 0; i < m->nr; i++) {
    const cli_cmp_row *w = &m->rows[i];
    if (!w->done) continue;
    double impr = m->rd.objective > 0 ? 100 * (m->rd.objective - w->run.r.objective) / m->rd.objective : 0;
    cli_sb_printf(b, "<tr%s><td>", i == m->best ? " class=\"best\"" : "");
    cli_xml_text(b, w->name);
    cli_sb_printf(b, "</td><td>%s</td><td>%s</td><td>%+.2f%%</td><td>%.4f ms</td><td>", cli_cmp_kind_name(w->kind),
                  cli_task_fmt(r->task, w->run.r.objective, v, sizeof v), impr, w->run.r.step_time * 1e3);
    human(b, w->run.r.peak_mem, "B");
    cli_sb_printf(b, "</td><td>%s</td><td>%llu</td><td>%.3f</td><td>", w->run.r.feasible ? "yes" : "NO",
                  (unsigned long long)w->run.evals, w->run.seconds);
    cli_xml_text(b, cli_cmp_start_col(w->kind, r->f, &m->start));
    cli_sb_printf(b, "%s</td></tr>\n", w->run.interrupted ? " (interrupted)" : "");
  }
  cli_sb_printf(b, "</table>\n");
  for (size_t i = 0; i < m->nskip; i++) {
    cli_sb_printf(b, "%s", i ? "<br>" : "<p class=\"note\">skipped: ");
    cli_xml_text(b, m->skipped[i]);
  }
  cli_sb_printf(b, "%s</section>\n", m->nskip ? "</p>" : "");
}

/* Colour of an op type (a stable hash into the palette). */
static const char *op_colour(const char *type) {
  return cli_report_palette[gopt_hash_bytes(type, strlen(type), 7) % 10];
}

/* One timeline: a row per device, then a row per link that carried a transfer. */
static void timeline_svg(cli_sbuf *b, const cli_report_ctx *r, const gopt_sim_state *st, const char *id,
                         double span) {
  const double L = 150, W = 1040, RH = 22, T = 18;
  size_t n = gopt_sim_timeline(st, NULL, 0);
  gopt_sim_item *it = calloc(n + 1, sizeof *it);
  int *used = calloc((size_t)r->c->n_links + 1, sizeof *used);
  if (!it || !used) {
    free(it);
    free(used);
    b->oom = 1;
    return;
  }
  gopt_sim_timeline(st, it, n);
  int rows = r->c->n_devices;
  for (size_t i = 0; i < n; i++)
    if (it[i].kind == 1 && !used[it[i].device]) used[it[i].device] = ++rows;
  double H = T + rows * RH + 6;
  cli_sb_printf(b, "<svg class=\"tl\" id=\"%s\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                   "data-left=\"%.0f\" data-width=\"%.0f\" data-height=\"%.0f\" data-span=\"%.9g\" data-t0=\"0\" "
                   "data-t1=\"%.9g\">\n<g class=\"ticks\"></g>\n",
                id, L + W + 10, H, L + W + 10, H, L, W, H, span, span);
  for (int d = 0; d < r->c->n_devices; d++) {
    cli_sb_printf(b, "<text x=\"4\" y=\"%.1f\" font-size=\"11\">", T + d * RH + 15);
    cli_xml_text(b, r->c->devices[d].name);
    cli_sb_printf(b, " (");
    cli_xml_text(b, r->c->devices[d].model);
    cli_sb_printf(b, ")</text>\n");
  }
  for (int l = 0; l < r->c->n_links; l++)
    if (used[l]) {
      cli_sb_printf(b, "<text x=\"4\" y=\"%.1f\" font-size=\"11\" fill=\"#666\">link ", T + (used[l] - 1) * RH + 15);
      cli_xml_text(b, r->c->links[l].name);
      cli_sb_printf(b, "</text>\n");
    }
  for (size_t i = 0; i < n; i++) {
    const gopt_sim_item *x = &it[i];
    double y = T + (x->kind ? used[x->device] - 1 : x->device) * RH + 2;
    const char *name, *fill;
    char what[96];
    if (x->kind == 0) {
      name = gopt_node_name(r->g, x->id);
      fill = op_colour(gopt_node_type(r->g, x->id));
      snprintf(what, sizeof what, "%s", gopt_node_type(r->g, x->id));
    } else {
      gopt_sim_transfer_info ti;
      gopt_sim_transfer(st, (size_t)x->id, &ti);
      name = gopt_graph_str(r->g, r->g->tensors.a[ti.tensor].name);
      fill = "#999";
      snprintf(what, sizeof what, "transfer %d to %d, %.3g MB", ti.src, ti.dst, ti.bytes / 1e6);
    }
    cli_sb_printf(b, "<rect class=\"k\" data-s=\"%.9g\" data-e=\"%.9g\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                     "height=\"%.0f\" fill=\"%s\"><title>",
                  x->start, x->end, L + x->start / span * W, y, fmax((x->end - x->start) / span * W, 0.6), RH - 4,
                  fill);
    cli_xml_text(b, name);
    cli_sb_printf(b, " (");
    cli_xml_text(b, what);
    cli_sb_printf(b, "): %.4f to %.4f ms</title></rect>\n", x->start * 1e3, x->end * 1e3);
  }
  cli_sb_printf(b, "</svg>\n");
  free(it);
  free(used);
}

void cli_report_timeline(cli_sbuf *b, const cli_report_ctx *r) {
  double span = fmax(r->best_r.step_time, r->dflt_r.step_time);
  if (!(span > 0)) span = 1e-9;
  cli_sb_printf(b, "<section id=\"timeline\"><h2>Timeline</h2>\n<p class=\"note\">One row per device (and per link "
                   "that carried a transfer); both on one time axis. Wheel to zoom, drag to pan; hover a kernel "
                   "for its name and times.</p>\n<div class=\"zoom\"><button data-zoom=\"in\" id=\"zoom-in\">+</button>"
                   "<button data-zoom=\"out\" id=\"zoom-out\">&minus;</button><button data-zoom=\"reset\" "
                   "id=\"zoom-reset\">reset</button> <span id=\"tl-window\"></span></div>\n<h3>Best: ");
  cli_xml_text(b, r->best_name);
  cli_sb_printf(b, " (step %.4f ms)</h3>\n", r->best_r.step_time * 1e3);
  timeline_svg(b, r, r->best_st, "tl-best", span);
  cli_sb_printf(b, "<h3>Default heuristic (step %.4f ms)</h3>\n", r->dflt_r.step_time * 1e3);
  timeline_svg(b, r, r->dflt_st, "tl-default", span);
  cli_sb_printf(b, "</section>\n");
}

/* Device d's memory over time: the best decisions' curve, the default's in grey, the capacity. */
static void memory_svg(cli_sbuf *b, const cli_report_ctx *r, int d) {
  const double W = 560, H = 190, L = 62, R = 10, T = 22, B = 26;
  gopt_error err = {0};
  double *t[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
  size_t n[2] = {0, 0};
  const gopt_sim_state *st[2] = {r->best_st, r->dflt_st};
  double tmax = fmax(r->best_r.step_time, r->dflt_r.step_time), cap = r->c->devices[d].mem_bytes, ymax = 0;
  for (int k = 0; k < 2; k++) {
    if (gopt_sim_memory_curve(st[k], d, &t[k], &y[k], &n[k], &err)) n[k] = 0;
    for (size_t i = 0; i < n[k]; i++) ymax = fmax(ymax, y[k][i]);
  }
  /* the scale reaches the capacity unless the peak is under a tenth of it: then the capacity
   * line sits on the top edge, labelled as above the scale */
  int off_scale = ymax * 10 < cap;
  ymax = off_scale ? ymax * 1.15 : fmax(ymax, cap) * 1.08;
  if (!(tmax > 0)) tmax = 1e-9;
  if (!(ymax > 0)) ymax = 1;
#define MX(v) (L + (v) / tmax * (W - L - R))
#define MY(v) (T + (1 - (v) / ymax) * (H - T - B))
  cli_sb_printf(b, "<svg class=\"mem\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
                   "<text x=\"%.0f\" y=\"14\" font-size=\"12\">",
                W, H, W, H, L);
  cli_xml_text(b, r->c->devices[d].name);
  cli_sb_printf(b, ": peak %.1f MB best, %.1f MB default</text>\n", r->best_r.peak_mem[d] / 1e6, r->dflt_r.peak_mem[d] / 1e6);
  cli_sb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#bbb\"/>\n", L, T,
                W - L - R, H - T - B);
  for (int k = 0; k <= 4; k++) {
    double v = ymax * k / 4;
    cli_sb_printf(b, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.3g MB</text>\n", L - 4,
                  MY(v) + 3, v / 1e6);
  }
  cli_sb_printf(b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"end\">%.4f ms</text>\n", W - R, H - 8,
                tmax * 1e3);
  const char *col[2] = {cli_report_palette[d % 10], "#aaa"};
  for (int k = 1; k >= 0; k--) {
    if (!n[k]) continue;
    cli_sb_printf(b, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                  k ? "mem-default" : "mem-best", col[k]);
    for (size_t i = 0; i < n[k]; i++) {
      if (i) cli_sb_printf(b, " %.2f,%.2f", MX(t[k][i]), MY(y[k][i - 1]));
      cli_sb_printf(b, " %.2f,%.2f", MX(t[k][i]), MY(y[k][i]));
    }
    cli_sb_printf(b, "\"/>\n");
  }
  double cy = off_scale ? T : MY(cap);
  cli_sb_printf(b, "<line class=\"capacity\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#d62728\" "
                   "stroke-dasharray=\"6,4\"/><text x=\"%.0f\" y=\"%.2f\" font-size=\"10\" fill=\"#d62728\" "
                   "text-anchor=\"end\">capacity %.0f MB%s</text>\n</svg>\n",
                L, W - R, cy, cy, W - R - 4, cy + (off_scale ? 11 : -4), cap / 1e6, off_scale ? " (above the scale)" : "");
#undef MX
#undef MY
  for (int k = 0; k < 2; k++) {
    free(t[k]);
    free(y[k]);
  }
}

void cli_report_memory(cli_sbuf *b, const cli_report_ctx *r) {
  cli_sb_printf(b, "<section id=\"memory\"><h2>Memory over time</h2>\n<p class=\"note\">Bytes allocated on each "
                   "device (weights and inputs resident all step, activations from their kernel's start to their "
                   "last use), best decisions in colour, the default's in grey; the dashed line is the device's "
                   "capacity.</p>\n<div class=\"grid\">\n");
  for (int d = 0; d < r->c->n_devices && d < 32; d++) memory_svg(b, r, d);
  cli_sb_printf(b, "</div></section>\n");
}

void cli_report_convergence(cli_sbuf *b, const cli_report_ctx *r) {
  cli_sb_printf(b, "<section id=\"convergence\"><h2>Convergence</h2>\n<p class=\"note\">Best objective found vs "
                   "evaluations for the search and learned methods; baselines and the default as dashed lines.</p>\n");
  char title[256];
  snprintf(title, sizeof title, "%s: %s task on %s", r->f->model, r->f->task, r->c->name);
  cli_cmp_plot_svg(b, title, r->task, r->m, 0);
  cli_sb_printf(b, "</section>\n");
}

void cli_report_fidelity(cli_sbuf *b, const cli_report_ctx *r) {
  cli_sb_printf(b, "<section id=\"fidelity\"><h2>Cost-model fidelity</h2>\n");
  if (!r->costdb) {
    cli_sb_printf(b, "<p class=\"note\">No measured cost database given (--costdb FILE.json or FILE.sqlite, "
                     "written by gopt run --profile): the simulator used its analytical cost model only.</p></section>\n");
    return;
  }
  gopt_cluster *host = NULL;
  gopt_sim *s = NULL;
  gopt_error err = {0};
  size_t N = r->g->nodes.n, k = 0;
  double *pred = calloc(N + 1, sizeof *pred), *meas = calloc(N + 1, sizeof *meas), tot_p = 0, tot_m = 0;
  if (!pred || !meas || gopt_cluster_parse("host", &host, &err) || gopt_sim_new(r->g, host, NULL, &s, &err)) {
    cli_sb_printf(b, "<p class=\"note\">fidelity not computed: ");
    cli_xml_text(b, err.msg[0] ? err.msg : "out of memory");
    cli_sb_printf(b, "</p></section>\n");
    goto done;
  }
  for (size_t n = 0; n < N; n++) {
    if (!gopt_node_alive(r->g, (int32_t)n)) continue;
    double p = gopt_sim_node_time(s, (int32_t)n, 0);
    gopt_cost_entry e;
    if (!gopt_costdb_get(r->costdb, gopt_op_signature(r->g, (int32_t)n), &e)) continue;
    pred[k] = p;
    meas[k++] = e.seconds;
    tot_p += p;
    tot_m += e.seconds;
  }
  cli_sb_printf(b, "<table class=\"kv\"><tr><td>database</td><td>");
  cli_xml_text(b, r->costdb_path);
  cli_sb_printf(b, " (host ");
  cli_xml_text(b, gopt_costdb_host(r->costdb));
  cli_sb_printf(b, ", %zu entries)</td></tr>\n<tr><td>nodes measured</td><td>%zu of %zu</td></tr>\n",
                gopt_costdb_size(r->costdb), k, gopt_graph_node_count(r->g));
  if (k >= 2) {
    cli_sb_printf(b, "<tr><td>Kendall tau (predicted vs measured op times)</td><td>%.3f</td></tr>\n"
                     "<tr><td>median absolute error</td><td>%.1f%%</td></tr>\n"
                     "<tr><td>sum predicted / measured (measured ops)</td><td>%.4f / %.4f ms</td></tr>\n",
                  gopt_sim_kendall_tau(pred, meas, k), gopt_sim_mdape(pred, meas, k, NULL), tot_p * 1e3, tot_m * 1e3);
  }
  cli_sb_printf(b, "</table>\n<p class=\"note\">Predicted: the analytical model of this host's device preset "
                   "(gopt calibrate fits it to the database).</p></section>\n");
done:
  free(pred);
  free(meas);
  gopt_sim_free(s);
  gopt_cluster_free(host);
}
