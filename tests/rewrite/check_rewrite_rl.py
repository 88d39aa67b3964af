"""check_rewrite_rl.py GOPT: the X-RLflow-style rewrite agent end to end: `gopt train --method
rewrite` writes a policy (2 tiny iterations) and an interrupted run resumed gives the same file;
with `--imitate 2` it writes other weights that rl runs, and a negative --imitate is one error line;
`gopt rewrite --method rl --policy P` on a structure-only zoo model and on a Conv+BN model with real
weights passes the same verification as greedy; with sampled episodes (--samples 8) the result is
never costlier than the greedy episode's (--samples 0) and the same on a second run (gopt's executor and ONNX Runtime, onnx.checker
full check; BN folded into the weights); a corrupted or truncated policy, a policy of another
kind (GO's placement policy) and a bad training flag each get one error line naming the file or
flag and a non-zero exit, and nothing is written."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_rewrite_cli import GOPT, ROOT, conv_bn_model, run  # noqa: E402

TRAIN = ["train", "--method", "rewrite", "resnet50:depth=18", "--iters", "3", "--episodes", "2", "--steps", "3",
         "--seed", "5", "--threads", "1"]


def gopt(args):
    return subprocess.run([GOPT, *args], capture_output=True, text=True, cwd=ROOT)


def one_line_error(what, r, *needles):
    lines = r.stderr.strip().splitlines()
    if r.returncode == 0 or len(lines) != 1 or not all(n in lines[0] for n in needles):
        print(f"check_rewrite_rl: {what}: expected one error line naming {needles}, got exit {r.returncode}: "
              f"{r.stderr!r}", file=sys.stderr)
        return 1
    return 0


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        pol, part = os.path.join(d, "p.gpol"), os.path.join(d, "part.gpol")
        r = gopt(TRAIN + ["-o", pol])
        if r.returncode != 0 or not os.path.exists(pol):
            raise SystemExit(f"check_rewrite_rl: training failed: {r.stderr.strip()}")
        r = gopt(TRAIN + ["-o", part, "--stop-after", "1"])
        r2 = gopt(TRAIN + ["-o", part, "--resume"])
        with open(pol, "rb") as a, open(part, "rb") as b:
            if r.returncode != 130 or r2.returncode != 0 or a.read() != b.read():
                print(f"check_rewrite_rl: interrupted + resumed training differs from one run "
                      f"({r.returncode}, {r2.returncode}: {r2.stderr.strip()})", file=sys.stderr)
                failures += 1
        # the imitation warm start (steepest descent's labels) trains other weights, which rl runs
        imit = os.path.join(d, "imit.gpol")
        r = gopt(TRAIN + ["-o", imit, "--imitate", "2"])
        with open(pol, "rb") as a, open(imit, "rb") as b:
            if r.returncode != 0 or a.read() == b.read():
                print(f"check_rewrite_rl: --imitate 2: exit {r.returncode} ({r.stderr.strip()}) or the same file as PPO's",
                      file=sys.stderr)
                failures += 1
        failures += one_line_error("bad --imitate", gopt(TRAIN + ["-o", imit, "--imitate", "-1"]), "--imitate")
        out = os.path.join(d, "out.onnx")
        run("resnet50:depth=18", out, ["--method", "rl", "--policy", imit])
        j = run("resnet50:depth=18", out, ["--method", "rl", "--policy", pol])
        print(f"resnet18 rl: {j['rules_applied']} {j['predicted_before_s']:.3g} -> {j['predicted_after_s']:.3g}")
        # sampled episodes: the best of the greedy episode and 8 sampled ones is never costlier than
        # the greedy episode alone, and one seed gives one result
        one = run("resnet50:depth=18", out, ["--method", "rl", "--policy", pol, "--samples", "0"])
        many = [run("resnet50:depth=18", out, ["--method", "rl", "--policy", pol, "--samples", "8", "--seconds", "600"])
                for _ in range(2)]
        if (many[0]["predicted_after_s"] > one["predicted_after_s"] * (1 + 1e-12)
                or many[0]["predicted_after_s"] != many[1]["predicted_after_s"]
                or "and 8 sampled" not in many[0].get("search_note", "")
                or "and 0 sampled" not in one.get("search_note", "")):
            print(f"check_rewrite_rl: sampled episodes: greedy episode {one}, with 8 samples {many}", file=sys.stderr)
            failures += 1
        src = os.path.join(d, "convbn.onnx")
        conv_bn_model(src)
        j = run(src, os.path.join(d, "convbn_out.onnx"), ["--method", "rl", "--policy", pol])
        print(f"convbn rl: {j['rules_applied']}")
        # bad policies: one line naming the file, nothing written
        with open(pol, "rb") as f:
            data = bytearray(f.read())
        bad = os.path.join(d, "bad.gpol")
        data[len(data) // 2] ^= 0x10
        open(bad, "wb").write(data)
        x = os.path.join(d, "x.onnx")
        failures += one_line_error("corrupted policy", gopt(["rewrite", src, "-o", x, "--method", "rl", "--policy", bad]),
                                   bad, "corrupted")
        open(bad, "wb").write(data[: len(data) // 3])
        failures += one_line_error("truncated policy", gopt(["rewrite", src, "-o", x, "--method", "rl", "--policy", bad]),
                                   bad, "truncated")
        go = os.path.join(ROOT, "policies", "placement.gpol")
        if os.path.exists(go):
            failures += one_line_error("GO policy", gopt(["rewrite", src, "-o", x, "--method", "rl", "--policy", go]),
                                       go, "placement")
        failures += one_line_error("--samples without rl", gopt(["rewrite", src, "-o", x, "--samples", "3"]), "--samples")
        failures += one_line_error("policy for the wrong command", gopt(["optimize", src, "--task", "placement",
                                   "--cluster", "V100", "--method", "go", "--policy", pol, "-o", x]), pol)
        if os.path.exists(x):
            print("check_rewrite_rl: an output was written after a failure", file=sys.stderr)
            failures += 1
        failures += one_line_error("bad training flag", gopt(["train", "--method", "rewrite", "resnet50", "-o", x, "--bogus"]),
                                   "--bogus")
        failures += one_line_error("bad training method", gopt(["train", "--method", "nope", "-o", x]), "nope")
        shutil.rmtree(d, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
