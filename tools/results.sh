#!/usr/bin/env bash
# results.sh [--quick] [BUILD_DIR]: reproduces docs/RESULTS.md. For every zoo model (default
# sizes), every corpus model and a few tiny zoo graphs, and for every task, runs
# `gopt compare` (all baselines of the task and the search methods random, local, anneal, gibbs,
# brkga) at 1,000 and 5,000 evaluations twice: with the searches starting from the best baseline
# (`--start best`, compare's default; the baselines' evaluations count in the budget) and from the
# compiler's default heuristic (`--start default`, as the papers report search); and the exact
# methods (ilp, dp) with a 10-minute limit where they apply; then writes the tables, marking and
# counting the cells whose result does not fit in device memory. --quick: only the tiny graphs and two small models
# (a smoke run of the whole pipeline, ~1.5 minutes). Environment: RESULTS_OUT (default
# docs/RESULTS.md), RESULTS_THREADS (default 2), RESULTS_SEED (default 0).
set -euo pipefail
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
BUILD="${1:-build}"
GOPT="$BUILD/bin/gopt"
OUT="${RESULTS_OUT:-docs/RESULTS.md}"
THREADS="${RESULTS_THREADS:-2}"
SEED="${RESULTS_SEED:-0}"
PY=/usr/bin/python3
[ -x "$GOPT" ] || { echo "results.sh: $GOPT not found (build first: cmake --build $BUILD)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

ZOO=(inception_v3 resnet50 transformer transformer_xl bert gpt2 wavenet gnmt amoebanet rnnlm)
CORPUS=(corpus/*.onnx)
TINY=("wavenet:blocks=1,layers=1" "rnnlm:steps=1,layers=1" "wavenet:blocks=1,layers=2")
if [ $QUICK = 1 ]; then ZOO=(resnet50); CORPUS=(corpus/squeezenet1_1.onnx); fi
TASKS=(placement fusion schedule memory joint)
SEARCH=random,local,anneal,gibbs,brkga
cluster_of() { # task [tiny]
  case "$1" in
    fusion) echo V100 ;;
    memory) if [ "${2:-}" = tiny ]; then echo V100; else echo 2xV100-nvlink; fi ;;
    *) echo 4xV100-nvlink ;;
  esac
}
baselines_of() {
  case "$1" in
    placement) echo single,round_robin,metis,expert,m_etf ;;
    fusion) echo no_fusion,xla,tvm ;;
    schedule) echo bfs,dfs,critical_path,mem_greedy ;;
    memory) echo single+mem_greedy,metis+dfs,metis+mem_greedy,expert+mem_greedy,m_etf ;;
    joint) echo metis+critical_path+xla,expert+critical_path+xla,m_etf+xla,m_etf+tvm,metis+critical_path+tvm ;;
  esac
}

t_start=$(date +%s)
i=0
run_model() { # model kind(zoo|corpus|tiny)
  local model="$1" kind="$2" task cl b tag
  for task in "${TASKS[@]}"; do
    cl=$(cluster_of $task $kind)
    tag=$(echo "$model" | tr '/:=,' '____')
    for b in 1000 5000; do
      i=$((i + 1))
      if ! timeout 1800 "$GOPT" compare "$model" --task $task --cluster $cl --budget $b --seed $SEED \
          --threads $THREADS --methods "$(baselines_of $task),$SEARCH" --json \
          >"$WORK/cmp.$kind.$tag.$task.$b.json" 2>"$WORK/err"; then
        echo "results.sh: compare $model $task $b failed or timed out: $(tail -1 "$WORK/err")" >&2
        rm -f "$WORK/cmp.$kind.$tag.$task.$b.json"
      fi
      if ! timeout 1800 "$GOPT" compare "$model" --task $task --cluster $cl --budget $b --seed $SEED \
          --threads $THREADS --methods "$SEARCH" --start default --json \
          >"$WORK/cmpd.$kind.$tag.$task.$b.json" 2>"$WORK/err"; then
        echo "results.sh: compare --start default $model $task $b failed or timed out: $(tail -1 "$WORK/err")" >&2
        rm -f "$WORK/cmpd.$kind.$tag.$task.$b.json"
      fi
    done
    for m in ilp dp; do
      if timeout 660 "$GOPT" optimize "$model" --task $task --cluster $cl --method $m --seconds 600 \
          --seed $SEED --threads $THREADS --json >"$WORK/exact.$kind.$tag.$task.$m.json" 2>"$WORK/err"; then :; else
        rm -f "$WORK/exact.$kind.$tag.$task.$m.json"
      fi
    done
    echo "results.sh: [$(( $(date +%s) - t_start )) s] $model $task done" >&2
  done
}
for m in "${TINY[@]}"; do run_model "$m" tiny; done
for m in "${ZOO[@]}"; do run_model "$m" zoo; done
for m in "${CORPUS[@]}"; do run_model "$m" corpus; done
elapsed=$(( $(date +%s) - t_start ))

CPU=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
NCPU=$(nproc)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)
PRESETS=$("$GOPT" devices 2>/dev/null | grep -o "measured-GPU [^ ]*" | sed 's/measured-GPU //' | sort -u | paste -sd, - || true)
"$PY" - "$WORK" "$OUT" "$elapsed" "$CPU" "$NCPU" "$COMMIT$DIRTY" "$THREADS" "$SEED" "$QUICK" "$PRESETS" <<'EOF'
import glob, json, os, sys, datetime
work, out, elapsed, cpu, ncpu, commit, threads, seed, quick, presets = sys.argv[1:11]
tasks = ["placement", "fusion", "schedule", "memory", "joint"]
search = ["random", "local", "anneal", "gibbs", "brkga"]
kinds = ["tiny", "zoo", "corpus"]
cmp, cmpd, exact, order = {}, {}, {}, []
def key_of(path):
    # <pfx>.<kind>.<model tag>.<task>.<x>.json ; the model tag has no dots except '.onnx'
    base = os.path.basename(path)[:-5]
    parts = base.split(".")
    return parts[1], ".".join(parts[2:-2]), parts[-2], parts[-1]
for p in sorted(glob.glob(os.path.join(work, "cmp.*.json"))):
    kind, tag, task, b = key_of(p)
    c = json.load(open(p))
    cmp[(c["model"], task, int(b))] = c
    if (kind, c["model"]) not in order: order.append((kind, c["model"]))
for p in sorted(glob.glob(os.path.join(work, "cmpd.*.json"))):
    kind, tag, task, b = key_of(p)
    c = json.load(open(p))
    cmpd[(c["model"], task, int(b))] = c
for p in sorted(glob.glob(os.path.join(work, "exact.*.json"))):
    kind, tag, task, m = key_of(p)
    o = json.load(open(p))
    if o.get("optimal"):
        prev = exact.get((o["model"], task))
        if prev is None or (not prev["feasible"], o["objective"]) < (not o["feasible"], prev["objective"]):
            exact[(o["model"], task)] = o
order.sort(key=lambda km: kinds.index(km[0]))

def unit(task):
    return ("MB", 1e-6) if task == "memory" else ("ms", 1e3)
def fmt_abs(task, v):
    u, s = unit(task)
    return f"{v*s:.4g} {u}"
def pct(d, v):
    return 100.0 * (d - v) / d if d > 0 else 0.0
# a cell: (improvement %, fits in memory) or None; over-memory cells are marked and counted
OVER = "†"
over = {"baselines": 0, "search from best": 0, "search from the default": 0}
cells_total = {k: 0 for k in over}
def cell_of(r, d, kind):
    if not r: return None
    cells_total[kind] += 1
    if not r["feasible"]: over[kind] += 1
    return (pct(d, r["objective"]), bool(r["feasible"]))
def row_best(vals):
    # hard ranking: the best cell among those that fit, else among all
    vs = [v for v in vals if v is not None]
    fit = [v[0] for v in vs if v[1]]
    pool = fit or [v[0] for v in vs]
    return (max(pool), bool(fit)) if pool else None
def show(v, best):
    if v is None: return "–"
    s = f"{v[0]:+.1f}" + ("" if v[1] else OVER)
    return f"**{s}**" if best is not None and v[1] == best[1] and abs(v[0] - best[0]) < 1e-9 else s
def table_head(hdr):
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|")
def search_cells(res, d, kind, cells, vals):
    # each search method's (1K, 5K) cell pair, appended to cells, both cells to vals
    for name in search:
        va = cell_of(res.get((name, 1000)), d, kind)
        vb = cell_of(res.get((name, 5000)), d, kind)
        cells.append((va, vb)); vals += [va, vb]
def res_of(*pairs):
    res = {}
    for cc, b in pairs:
        if not cc: continue
        for r in cc["results"]:
            res[(r["method"], b)] = r
    return res

L = []
L.append("# Results: baselines and search methods on every task\n")
L.append("Reproduce with `tools/results.sh BUILD_DIR` (this file is its output; "
         + ("**--quick smoke run**; " if quick == "1" else "") +
         f"took {int(elapsed)//60} min {int(elapsed)%60} s).\n")
L.append(f"- GPU cost model (`gopt devices`): {presets or 'unknown'} (docs/SIMULATOR.md).")
L.append(f"- machine: {cpu}, {ncpu} cores shared with other builds (timings are wall-clock and noisy); "
         f"`--threads {threads}`, `--seed {seed}`; gopt commit {commit}; {datetime.date.today()}.")
L.append("- clusters: placement, schedule and joint on `4xV100-nvlink`; fusion on `V100`; memory on "
         "`2xV100-nvlink` (the tiny graphs: memory on one `V100`, where the exact methods apply). "
         "Analytical costs (docs/SIMULATOR.md); objectives are simulated step time (ms) or peak memory (MB), "
         "with the memory penalty of docs/TASKS.md when over capacity.")
L.append("- every cell is the improvement over the compiler's default heuristic of the task "
         "(docs/TASKS.md: all on device 0 / XLA-style fusion / the simulator's bottom-level priorities), "
         "in %, higher is better; a search method shows `1K / 5K` evaluations (its start's evaluations "
         "included); **bold** = best in the row (a result that fits in memory ranks above any that does not). "
         f"Baselines use one evaluation. `–`: did not run or did not finish. {OVER}: over device memory "
         "(its objective carries the memory penalty).")
L.append("- searches start from the best of the default and the task's baselines (`--start best`, column "
         "`start`: the start of the 5K run), as `gopt compare` does by default; the section "
         "*Search from the default heuristic* repeats them from the default (`--start default`), as the papers report.")
L.append("OVER_MEMORY_SUMMARY")
L.append("- exact: `ilp` (placement, ≤ 30 nodes; one-device peak memory, ≤ 20 nodes) and `dp` (one-device peak "
         "memory, ≤ 40 nodes) from search.h, run with a 10-minute limit; only proven-optimal results are used.\n")

def baselines_of(task, model):
    for b in (1000, 5000):
        c = cmp.get((model, task, b))
        if c: return [r["method"] for r in c["results"] if r["kind"] == "baseline"]
    return []

for task in tasks:
    models = [(k, m) for (k, m) in order if any((m, task, b) in cmp for b in (1000, 5000))]
    if not models: continue
    bl = []
    for k, m in models:
        for name in baselines_of(task, m):
            if name not in bl: bl.append(name)
    L.append(f"## {task}\n")
    table_head(["model", "nodes", "default"] + bl + ["start"] + search + ["exact"])
    for k, m in models:
        c1, c5 = cmp.get((m, task, 1000)), cmp.get((m, task, 5000))
        c = c5 or c1
        d = c["default_objective"]
        res = res_of((c1, 1000), (c5, 5000))
        cells, vals = [], []
        for name in bl:
            r = res.get((name, 5000)) or res.get((name, 1000))
            v = cell_of(r, d, "baselines")
            cells.append(v); vals.append(v)
        search_cells(res, d, "search from best", cells, vals)
        ex = exact.get((m, task))
        best = row_best(vals)
        start = next((r.get("start", "–") for r in c["results"] if r["kind"] == "search"), "–")
        row = [f"`{m}`" + (" (tiny)" if k == "tiny" else ""), str(c["nodes"]), fmt_abs(task, d)]
        for j, cell in enumerate(cells):
            if j == len(bl): row.append(f"`{start}`" if start != "–" else start)
            row.append(show(cell, best) if j < len(bl) else f"{show(cell[0], best)} / {show(cell[1], best)}")
        row.append(f"{pct(d, ex['objective']):+.1f} ({ex['method']})" if ex else "–")
        L.append("| " + " | ".join(row) + " |")
    L.append("")

# the same searches from the default heuristic
if cmpd:
    L.append("## Search from the default heuristic\n")
    L.append("The search methods again, started from the compiler's default (`--start default`) as in the papers; "
             "`best baseline` is the best baseline cell of the tables above.\n")
    for task in tasks:
        models = [(k, m) for (k, m) in order if any((m, task, b) in cmpd for b in (1000, 5000))]
        if not models: continue
        L.append(f"### {task}\n")
        table_head(["model", "default", "best baseline"] + search)
        for k, m in models:
            c1, c5 = cmpd.get((m, task, 1000)), cmpd.get((m, task, 5000))
            c = c5 or c1
            d = c["default_objective"]
            res = res_of((c1, 1000), (c5, 5000))
            cb = cmp.get((m, task, 5000)) or cmp.get((m, task, 1000))
            bb = None
            if cb:
                bls = [r for r in cb["results"] if r["kind"] == "baseline"]
                if bls: bb = min(bls, key=lambda r: (not r["feasible"], r["objective"]))
            bcell = (pct(d, bb["objective"]), bool(bb["feasible"])) if bb else None
            vals, cells = [bcell], []
            search_cells(res, d, "search from the default", cells, vals)
            best = row_best(vals)
            row = [f"`{m}`" + (" (tiny)" if k == "tiny" else ""), fmt_abs(task, d),
                   (show(bcell, best) + f" ({bb['method']})") if bb else "–"]
            for a, b5 in cells:
                row.append(f"{show(a, best)} / {show(b5, best)}")
            L.append("| " + " | ".join(row) + " |")
        L.append("")

# gap to the exact optimum
gaps = [(m, t) for (m, t) in exact]
if gaps:
    L.append("## Gap to the exact optimum\n")
    L.append("Where `ilp` or `dp` proved optimality: (objective − optimum) / optimum in %, lower is better "
             "(search methods at 5K evaluations; `–` where the method did not run).\n")
    meths = []
    for (m, t) in gaps:
        for name in baselines_of(t, m) + search:
            if name not in meths: meths.append(name)
    L.append("| model | task | optimum | method | " + " | ".join(meths) + " |")
    L.append("|---|---|---:|---|" + "|".join(["---:"] * len(meths)) + "|")
    for (m, t) in sorted(gaps, key=lambda x: (tasks.index(x[1]), x[0])):
        ex = exact[(m, t)]
        c = cmp.get((m, t, 5000)) or cmp.get((m, t, 1000))
        res = {r["method"]: r for r in c["results"]} if c else {}
        opt = ex["objective"]
        row = [f"`{m}`", t, fmt_abs(t, opt), f"{ex['method']} ({ex['seconds']:.1f} s)"]
        for name in meths:
            r = res.get(name)
            row.append(f"{100*(r['objective']-opt)/opt:.2f}" if r and opt > 0 else "–")
        L.append("| " + " | ".join(row) + " |")
    L.append("")

# run times
L.append("## Time per method (5K evaluations, seconds, summed over the models of each task)\n")
L.append("| task | " + " | ".join(search) + " |")
L.append("|---|" + "|".join(["---:"] * len(search)) + "|")
for task in tasks:
    tot = {s: 0.0 for s in search}
    for (m, t, b), c in cmp.items():
        if t != task or b != 5000: continue
        for r in c["results"]:
            if r["method"] in tot: tot[r["method"]] += r["seconds"]
    L.append(f"| {task} | " + " | ".join(f"{tot[s]:.1f}" for s in search) + " |")
L.append("")
summary = ("- over-memory cells (" + OVER + "): " + ", ".join(f"{k} {over[k]} of {cells_total[k]}" for k in over)
           + f"; {sum(over.values())} in all.")
L = [summary if x == "OVER_MEMORY_SUMMARY" else x for x in L]
text = "\n".join(L) + "\n"
tmp = out + ".tmp"
open(tmp, "w").write(text)
os.replace(tmp, out)
print(f"results.sh: wrote {out}", file=sys.stderr)
EOF
