#!/usr/bin/python3
"""check_history.py GOPT: the run history and the SQLite cost database through the CLI.

In a temporary HOME (XDG_DATA_HOME unset): optimize and compare record one row per method
(model hash, task, cluster, method, seed, objective, evaluations, time, decisions, version) in
~/.local/share/gopt/history.sqlite, read back with `gopt history --json` and checked against
the commands' own --json; train records one row; --no-history and GOPT_HISTORY=0 record nothing; XDG_DATA_HOME moves
the database; `gopt history MODEL` lists only that model (the same structure under another zoo
spec spelling counts as the same model); `--start history` starts from the best recorded
decisions and is no worse than them; a corrupted history file gives a one-line warning, the
command still succeeds and the file is left untouched; `gopt costdb import/export` round-trips
a JSON database through SQLite byte for byte."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

GOPT = sys.argv[1]
failures = 0
M = "resnet50:depth=18"
TASK = ["--task", "placement", "--cluster", "2xV100"]


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)


def run(args, env, ok=True):
    p = subprocess.run([GOPT] + args, env=env, capture_output=True, text=True)
    if ok and p.returncode != 0:
        print("FAIL: gopt", " ".join(args), "->", p.returncode, p.stderr)
        sys.exit(1)
    return p


def history(env, *extra):
    return json.loads(run(["history", "--json"] + list(extra), env).stdout)


tmp = tempfile.mkdtemp(prefix="gopt_hist_")
try:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "GOPT_HISTORY", "GOPT_HISTORY_FILE")}
    env["HOME"] = tmp
    db = os.path.join(tmp, ".local/share/gopt/history.sqlite")
    check(history(env) == [], "empty history lists nothing")
    o = json.loads(run(["optimize", M] + TASK + ["--method", "anneal", "--budget", "120", "--seed", "3", "--json"], env).stdout)
    check(os.path.isfile(db), "history.sqlite created under ~/.local/share/gopt")
    h = history(env)
    check(len(h) == 1, "one record after optimize: %d" % len(h))
    r = h[0]
    for k, v in (("command", "optimize"), ("task", "placement"), ("cluster", "2xV100"), ("method", "anneal"),
                 ("seed", 3), ("evaluations", o["evaluations"]), ("model", M)):
        check(r[k] == v, "record %s: %r, expected %r" % (k, r[k], v))
    check(abs(r["objective"] - o["objective"]) <= 1e-12 * o["objective"], "record objective")
    check(isinstance(r["decisions"], dict) and "placement" in r["decisions"], "record holds the decisions")
    check(len(r["model_hash"]) == 16 and r["version"], "model hash and version")
    c = json.loads(run(["compare", M] + TASK + ["--methods", "local,round_robin", "--budget", "60", "--json"], env).stdout)
    h = history(env)
    check(len(h) == 3 and [x["method"] for x in h[1:]] == ["local", "round_robin"], "compare records each method")
    check(all(x["command"] == "compare" for x in h[1:]), "compare rows say compare")
    run(["optimize", M] + TASK + ["--method", "local", "--budget", "30", "--no-history"], env)
    env0 = dict(env, GOPT_HISTORY="0")
    run(["optimize", M] + TASK + ["--method", "local", "--budget", "30"], env0)
    check(len(history(env)) == 3, "--no-history and GOPT_HISTORY=0 record nothing")
    # another model: listed apart
    run(["optimize", "resnet50:depth=34"] + TASK + ["--method", "metis"], env)
    check(len(history(env)) == 4 and len(history(env, M)) == 3, "gopt history MODEL lists that model only")
    check(len(history(env, "resnet50:depth=18,batch=1")) == 3, "the same structure under another spelling")
    # --start history: the best recorded decisions (feasible, lowest objective), never worse
    best = min(x["objective"] for x in history(env, M))
    s = json.loads(run(["optimize", M] + TASK + ["--method", "local", "--budget", "40", "--start", "history", "--json"], env).stdout)
    check(s["start"].startswith("history"), "start named history: %s" % s["start"])
    check(s["objective"] <= best * (1 + 1e-12), "--start history no worse than the best record: %g > %g" % (s["objective"], best))
    p = run(["optimize", M, "--task", "placement", "--cluster", "4xV100", "--method", "local", "--start", "history"], env, ok=False)
    check(p.returncode != 0 and p.stderr.count("\n") == 1 and "no recorded run" in p.stderr,
          "--start history with no record: one line: %r" % p.stderr)
    # train: one record (method ppo, iterations as evaluations, the policy file)
    pol = os.path.join(tmp, "p.gpol")
    run(["train", "--task", "placement", "--cluster", "2xV100", "--graphs", M, "--iters", "2", "-o", pol], env)
    t = [x for x in history(env) if x["command"] == "train"]
    check(len(t) == 1 and t[0]["method"] == "ppo" and t[0]["evaluations"] == 2 and t[0]["decisions_file"] == pol,
          "train recorded: %r" % t)
    # XDG_DATA_HOME
    envx = dict(env, XDG_DATA_HOME=os.path.join(tmp, "xdg"))
    run(["optimize", M] + TASK + ["--method", "local", "--budget", "20"], envx)
    check(os.path.isfile(os.path.join(tmp, "xdg/gopt/history.sqlite")) and len(history(envx)) == 1,
          "XDG_DATA_HOME respected")
    # corrupted history: warning, success, file untouched
    bad = os.path.join(tmp, "bad")
    os.makedirs(os.path.join(bad, "gopt"))
    junk = b"not a database " * 20
    open(os.path.join(bad, "gopt/history.sqlite"), "wb").write(junk)
    envb = dict(env, XDG_DATA_HOME=bad)
    p = run(["optimize", M] + TASK + ["--method", "local", "--budget", "20"], envb)
    warn = [l for l in p.stderr.splitlines() if "history" in l]
    check(len(warn) == 1 and "not a SQLite database" in warn[0], "one-line warning: %r" % p.stderr)
    check(open(os.path.join(bad, "gopt/history.sqlite"), "rb").read() == junk, "corrupted file left as it was")
    p = run(["history"], envb, ok=False)
    check(p.returncode == 1 and p.stderr.count("\n") == 1 and p.stderr.startswith("gopt history: "),
          "gopt history on a corrupted file: one line: %r" % p.stderr)
    # costdb import/export
    cj = os.path.join(tmp, "c.json")
    json.dump({"format": "gopt-costdb", "version": 1, "host": "h", "threads": 2,
               "entries": [{"sig": "%016x" % (i * 7919 + 1), "op": "Relu", "desc": "d", "seconds": 1e-6 * (i + 1), "reps": 4}
                           for i in range(20)]}, open(cj, "w"))
    sq, cj2 = os.path.join(tmp, "c.sqlite"), os.path.join(tmp, "c2.json")
    run(["costdb", "import", cj, sq], env)
    run(["costdb", "export", sq, cj2], env)
    a, b = json.load(open(cj)), json.load(open(cj2))
    check(a["entries"] == b["entries"] and b["host"] == "h", "costdb import/export round trip")
    check("20 entries" in run(["costdb", "info", sq], env).stdout, "costdb info")
finally:
    shutil.rmtree(tmp)
print("failures:", failures)
sys.exit(1 if failures else 0)
