#!/usr/bin/python3
"""check_progress.py GOPT: search progress on stderr.

Not a terminal (a pipe): a 2.5 s time-limited search prints plain lines ("anneal: N evals (P%)
best B  T s  ETA E s"), at least one while running and a final "done" line, without carriage
returns; a search shorter than 2 s prints nothing. A terminal (a pseudo-terminal): the bar
("[###...]  P%", "ETA") is redrawn in place with carriage returns and ends with a newline.
GOPT_PROGRESS=0 silences both. The lines' percentages never decrease."""
import os
import pty
import re
import subprocess
import sys

GOPT = sys.argv[1]
failures = 0
ARGS = ["optimize", "resnet50:depth=18", "--task", "placement", "--cluster", "4xV100", "--method", "anneal",
        "--no-history"]


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", msg)


env = dict(os.environ)
env.pop("GOPT_PROGRESS", None)
p = subprocess.run([GOPT] + ARGS + ["--seconds", "2.5", "--budget", "1000000000"], env=env, capture_output=True, text=True)
check(p.returncode == 0, "time-limited search ran: " + p.stderr)
lines = [l for l in p.stderr.splitlines() if l.startswith("anneal:")]
check(len(lines) >= 2 and "\r" not in p.stderr, "plain lines in a log: %r" % p.stderr)
check(any("ETA" in l for l in lines) and lines[-1].endswith("done"), "ETA while running, done at the end: %r" % lines)
pct = [float(m.group(1)) for l in lines for m in [re.search(r"\((\d+)%\)", l)] if m]
check(pct == sorted(pct) and len(pct) == len(lines), "percentages grow: %r" % pct)
p = subprocess.run([GOPT] + ARGS + ["--budget", "50"], env=env, capture_output=True, text=True)
check(p.returncode == 0 and p.stderr == "", "a short search prints nothing in a log: %r" % p.stderr)
q = subprocess.run([GOPT] + ARGS + ["--seconds", "2.5", "--budget", "1000000000"], env=dict(env, GOPT_PROGRESS="0"),
                   capture_output=True, text=True)
check(q.stderr == "", "GOPT_PROGRESS=0 silences the log: %r" % q.stderr)

# a terminal: stderr on a pseudo-terminal
master, slave = pty.openpty()
proc = subprocess.Popen([GOPT] + ARGS + ["--seconds", "1"], env=env, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
out = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
proc.wait()
os.close(master)
t = out.decode(errors="replace")
check(proc.returncode == 0, "search on a terminal ran")
check(t.count("\r") >= 2 and "[#" in t and "ETA" in t and "100%" in t, "bar redrawn with ETA: %r" % t[-400:])
print("failures:", failures)
sys.exit(1 if failures else 0)
