#!/usr/bin/python3
"""check_compare_start.py GOPT: `gopt compare` searches refine the best heuristic.

For three zoo models and every task (and the issue's over-memory case: a GNMT training step,
placement on 8 V100s, where everything on one device does not fit), `gopt compare --json` with
the default start (best) must show:
  - no search method ranked below the best baseline, in the hard memory ranking (a result that
    fits beats any over-memory one, then the lower objective), and compare's `best` is a row
    that no other row outranks;
  - per search method a `start` (the best of the default and the baselines: checked against the
    baseline rows, which are the same evaluations) and a `curve` [[evaluations, best], ...] with
    increasing evaluations within the budget, ending at the reported objective;
  - evaluations, the start's included, within the budget.
Then `gopt optimize --json` has `start` and `curve` too, and `--start default` / `--start metis`
start where they say."""
import json
import subprocess
import sys

GOPT = sys.argv[1]
BUDGET = 150
CLUSTER = {"placement": "4xV100-nvlink", "fusion": "V100", "schedule": "4xV100-nvlink",
           "memory": "2xV100-nvlink", "joint": "4xV100-nvlink"}
failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)


def key(r):  # the hard ranking, written independently of the library's comparator
    return (0 if r["feasible"] else 1, r["objective"])


def not_below(a, b):  # a ranks no lower than b (objectives within a relative 1e-12)
    if a["feasible"] != b["feasible"]:
        return a["feasible"]
    return a["objective"] <= b["objective"] * (1 + 1e-12)


def gopt(*args):
    p = subprocess.run([GOPT, *args], capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL: gopt", " ".join(args), "->", p.returncode, p.stderr.strip())
        sys.exit(1)
    return json.loads(p.stdout)


def check_compare(model, task, cluster, extra=()):
    c = gopt("compare", *model.split(), "--task", task, "--cluster", cluster, "--budget", str(BUDGET),
             "--threads", "2", "--json", *extra)
    tag = f"{model} {task}"
    base = [r for r in c["results"] if r["kind"] == "baseline"]
    srch = [r for r in c["results"] if r["kind"] == "search"]
    check(len(base) >= 3 and len(srch) >= 5, f"{tag}: {len(base)} baselines, {len(srch)} searches")
    bb = min(base, key=key)
    # the start: the best of the default and the baselines (ties keep the earlier candidate)
    best_name = None
    for r in srch:
        check(not_below(r, bb), f"{tag}: {r['method']} {key(r)} below the best baseline {bb['method']} {key(bb)}")
        check("start" in r and "curve" in r, f"{tag}: {r['method']}: no start/curve")
        if "start" not in r or "curve" not in r:
            continue
        if best_name is None:
            best_name = r["start"]
        check(r["start"] == best_name, f"{tag}: searches start differently")
        if r["start"] == "default":
            check(not bb["feasible"] or c["default_objective"] <= bb["objective"] * (1 + 1e-12),
                  f"{tag}: started from the default, worse than {bb['method']}")
        else:
            sb = [b for b in base if b["method"] == r["start"]]
            check(len(sb) == 1 and key(sb[0]) == key(bb) or (sb and not_below(sb[0], bb)),
                  f"{tag}: start {r['start']} is not the best baseline {bb['method']}")
        cv = r["curve"]
        check(len(cv) >= 1, f"{tag}: {r['method']}: empty curve")
        ev = [p[0] for p in cv]
        check(ev == sorted(ev) and len(set(ev)) == len(ev), f"{tag}: {r['method']}: curve evaluations {ev}")
        check(ev[-1] <= r["evaluations"] <= BUDGET or r["optimal"], f"{tag}: {r['method']}: evaluations")
        check(ev[0] == r["start_evaluations"] + 1, f"{tag}: {r['method']}: first curve point {cv[0]}")
        check(cv[-1][1] == r["objective"], f"{tag}: {r['method']}: curve ends at {cv[-1][1]}, objective {r['objective']}")
    names = {r["method"]: r for r in c["results"]}
    check(c.get("best") in names, f"{tag}: best {c.get('best')}")
    if c.get("best") in names:
        b = names[c["best"]]
        check(all(not_below(b, r) for r in c["results"]), f"{tag}: best {c['best']} is outranked")
    fits = sum(1 for r in srch if r["feasible"])
    print(f"ok: compare {tag}: start {best_name}, best baseline {bb['method']} {bb['objective']:.6g}"
          f"{'' if bb['feasible'] else ' (over memory)'}, best {c.get('best')}, {fits}/{len(srch)} searches fit")
    return c


for model in ("resnet50:depth=18", "bert:layers=2", "inception_v3"):
    for task in ("placement", "fusion", "schedule", "memory", "joint"):
        check_compare(model, task, CLUSTER[task])
c = check_compare("gnmt:layers=4 --training", "placement", "8xV100-nvlink")
check(not any(r["kind"] == "search" and not r["feasible"] for r in c["results"]),
      "gnmt training placement: a search ended over memory")

# optimize: start and curve; explicit starts
o = gopt("optimize", "resnet50:depth=18", "--task", "placement", "--cluster", "4xV100-nvlink", "--method", "local",
         "--budget", "60", "--json")
check(o.get("start") and isinstance(o.get("curve"), list) and o["curve"], f"optimize: start/curve {o.get('start')}")
check(o["evaluations"] <= 60 and o["curve"][-1][1] == o["objective"], "optimize: evaluations/curve end")
for start in ("default", "metis"):
    o = gopt("optimize", "resnet50:depth=18", "--task", "placement", "--cluster", "4xV100-nvlink", "--method",
             "gibbs", "--budget", "40", "--json", "--start", start)
    check(o["start"] == start and o["start_evaluations"] == 0 and o["evaluations"] <= 40, f"optimize --start {start}: {o['start']}")
    check(o["curve"][0][0] == 1, f"optimize --start {start}: curve starts at {o['curve'][0]}")
m = gopt("optimize", "resnet50:depth=18", "--task", "placement", "--cluster", "4xV100-nvlink", "--method", "metis",
         "--json")
s = gopt("optimize", "resnet50:depth=18", "--task", "placement", "--cluster", "4xV100-nvlink", "--method", "gibbs",
         "--budget", "1", "--json", "--start", "metis")
check(s["objective"] == m["objective"], "a budget of 1 from metis returns metis")
if failures:
    print(f"check_compare_start: {failures} failures")
    sys.exit(1)
print("check_compare_start: all passed")
