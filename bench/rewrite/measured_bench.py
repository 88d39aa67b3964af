"""measured_bench.py GOPT DATA DB [MODEL...]: the "Measured costs on this machine" table of
docs/REWRITE.md. For every corpus model (DATA/NAME/model.onnx, real weights from
tools/make_testdata.py) runs `gopt rewrite --cluster host --costdb DB --measure --json` (greedy,
TASO's search priced with measured op times, ops the database lacks profiled on demand into DB),
checks the written output with tools/onnx_check.py (onnx.checker full check; the rewrite was
verified by gopt's executor and ONNX Runtime before it was written) and prints per model: the
predicted gain, the gain measured on gopt's executor (one thread; median of 11 interleaved runs,
wall and CPU time) and on ONNX Runtime (one thread; 3 interleaved rounds of 5), the predicted-vs-measured error (predicted gain
minus the gain in CPU time, which the database's one-thread op times predict), and whether the rewrite was
written or the input kept (with the reason); then the mean measured gains. Gain = 1 - after/before
of the candidate the search found (0 when nothing was rewritten); the "written model" means count
a kept input as 0. One command: bench/rewrite/measured.sh."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rw_run  # noqa: E402

MODELS = ["bert_tiny", "densenet121", "efficientnet_b0", "gpt2_tiny", "inception_v3",
          "lraspp_mobilenet_v3_large", "lstm_seq2seq", "mobilenet_v2", "resnet18",
          "shufflenet_v2_x1_0", "squeezenet1_1", "swin_t", "vgg11", "wavenet"]


def rewrite(gopt, model, db):
    return rw_run.rewrite([gopt, "rewrite", model, "--measure", "--cluster", "host", "--costdb", db])


def gain(b, a):
    return None if b is None or a is None or b <= 0 else 1 - a / b


def pct(x):
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def main():
    gopt, data, db = sys.argv[1:4]
    models = sys.argv[4:] or MODELS
    print("| model | rules applied (candidate) | predicted ms before → after (gain) | gopt exec ms before → after "
          "(gain) | exec CPU-time gain | ONNX Runtime ms before → after (gain) | predicted − measured gain (exec CPU) | "
          "written | "
          "search s | ops profiled |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    exec_c, ort_c, exec_w, ort_w, errs = [], [], [], [], []
    written = kept = unchanged = 0
    for name in models:
        j, err, wall = rewrite(gopt, os.path.join(data, name, "model.onnx"), db)
        if j is None:
            print(f"| {name} | failed: {err} | | | | | | no | | |")
            continue
        ra = ", ".join(f"{k} ×{v}" for k, v in sorted(j["rules_applied"].items(), key=lambda kv: -kv[1])) or "none"
        pb, pa = j["predicted_before_s"], j["predicted_after_s"]
        mb, ma = j["measured_before_s"], j["measured_after_s"]
        ob, oa = j["ort_measured_before_s"], j["ort_measured_after_s"]
        changed = bool(j["rules_applied"])
        pg, eg, og = gain(pb, pa), gain(mb, ma), gain(ob, oa) if changed else 0.0
        if not changed:
            eg, status = 0.0, "unchanged"
            unchanged += 1
        elif j["written"]:
            status = "written"
            written += 1
        else:
            status = "kept input: " + j["kept_reason"].split(": ", 1)[-1]
            kept += 1
        exec_c.append(eg or 0.0)
        ort_c.append(og or 0.0)
        exec_w.append(eg if j["written"] else 0.0)
        ort_w.append(og if j["written"] and og is not None else 0.0)
        cg = gain(j["measured_cpu_before_s"], j["measured_cpu_after_s"]) if changed else 0.0
        err_pp = None if pg is None or cg is None else pg - cg
        if changed and err_pp is not None:
            errs.append(abs(err_pp))
        ort_cell = (f"{ob * 1e3:.2f} → {oa * 1e3:.2f} ({pct(og)})" if changed and ob and oa else "n/a (unchanged)")
        print(f"| {name} | {ra} | {pb * 1e3:.2f} → {pa * 1e3:.2f} ({pct(pg)}) | "
              f"{mb * 1e3:.2f} → {ma * 1e3:.2f} ({pct(eg)}) | "
              f"{pct(cg)} | {ort_cell} | "
              f"{'n/a' if err_pp is None or not changed else f'{100 * err_pp:+.1f} pp'} | {status} | "
              f"{j['search_seconds']:.2f} | {j.get('costdb_profiled', 0)} |")
        sys.stdout.flush()
    n = len(exec_c)
    if n:
        print()
        print(f"- {n} models: {written} rewritten and written, {kept} candidates measured slower and not written "
              f"(input kept), {unchanged} with nothing to rewrite")
        print(f"- mean measured gain of the written models (kept and unchanged count 0): gopt's executor "
              f"{pct(sum(exec_w) / n)}, ONNX Runtime on the same models {pct(sum(ort_w) / n)}")
        print(f"- mean measured gain of the search's candidates (before the guard): gopt's executor "
              f"{pct(sum(exec_c) / n)}, ONNX Runtime {pct(sum(ort_c) / n)}")
        if errs:
            print(f"- mean |predicted − measured gain| (gopt's executor, CPU time) over the {len(errs)} rewritten candidates: "
                  f"{100 * sum(errs) / len(errs):.1f} pp")


if __name__ == "__main__":
    main()
