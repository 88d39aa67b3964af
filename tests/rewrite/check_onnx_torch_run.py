"""check_onnx_torch_run.py GOPT: tools/onnx_torch_run.py (rewritten models on a PyTorch device) on
CPU. Two models with weights built by check_rewrite_cli.py and rewritten by `gopt rewrite` (the
built-ins added for Tensat's models: Relu moved below a Concat and a MaxPool, a batched MatMul with
a Split and Reshape, a Concat-of-inputs MatMul, interleaved grouped convs; and TASO's
merge_group_conv: 4 -> 2 groups): PyTorch's outputs of input and rewritten model agree, and gopt's
executor reproduces PyTorch's outputs of the rewritten model (`gopt run --check` on the inputs
and outputs the tool saved). Exit 77 (skipped) when PyTorch is not installed."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

if importlib.util.find_spec("torch") is None:
    print("check_onnx_torch_run: PyTorch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import check_rewrite_cli as crc  # noqa: E402

GOPT = sys.argv[1]


def main():
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        if crc.tensat_builtins(d) or crc.group_conv(d):
            raise SystemExit("check_onnx_torch_run: gopt rewrite failed on the test models")
        for src, out in (("tb.onnx", "tb_out.onnx"), ("gconv.onnx", "gconv_out.onnx")):
            src, out, save = os.path.join(d, src), os.path.join(d, out), os.path.join(d, out + ".data")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "onnx_torch_run.py"), src, out,
                                "--device", "cpu", "--warmup", "1", "--reps", "3", "--json", "--save", save],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"check_onnx_torch_run: {out}: exit {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
                failed += 1
                continue
            j = json.loads(r.stdout)
            if not (j["max_abs_diff"] <= 1e-4 and len(j["seconds"]) == 2 and min(j["seconds"]) > 0):
                print(f"check_onnx_torch_run: {out}: PyTorch: input and rewrite differ: {j}", file=sys.stderr)
                failed += 1
            g = subprocess.run([GOPT, "run", out, "--check", save], capture_output=True, text=True)
            if g.returncode != 0:
                print(f"check_onnx_torch_run: {out}: gopt run --check against PyTorch's outputs: "
                      f"{g.stdout.strip()} {g.stderr.strip()}", file=sys.stderr)
                failed += 1
            print(f"{os.path.basename(out)}: PyTorch max |diff| {j['max_abs_diff']:.3g}, speed-up "
                  f"{j['speedup']:.2f}x on cpu; gopt's executor matches PyTorch")
    if failed:
        raise SystemExit(f"check_onnx_torch_run: {failed} failure(s)")
    print("check_onnx_torch_run: ok")


if __name__ == "__main__":
    main()
