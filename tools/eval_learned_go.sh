#!/usr/bin/env bash
# eval_learned_go.sh GOPT POLICY BASEDIR OUTDIR: tools/eval_learned.sh's tables for another policy
# without re-running the searches. BASEDIR holds eval_learned.sh's compare JSON files (JSONDIR=...)
# for one task; for each pair in it this runs only the `go` row with POLICY (zero-shot at
# BUDGET1's file, fine-tuned for FINETUNE evaluations at BUDGET2's, the same flags and seed as
# eval_learned.sh), writes the files with the go row replaced into OUTDIR and prints the tables
# (tools/eval_learned.py). Every other row is deterministic in the pair, budget and seed, so the
# tables equal a full eval_learned.sh run with POLICY shipped; the go curves' SVGs are not redrawn.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
gopt="$1"; policy="$2"; base="$3"; out="$4"
b1="${BUDGET1:-1000}"; b2="${BUDGET2:-5000}"; ft="${FINETUNE:-333}"
mkdir -p "$out"
for f in "$base"/*.1k.json; do
  id="$(basename "$f" .1k.json)"
  task="${id%%_*}"; rest="${id#*_}"; cl="${rest%%_*}"; model="${rest#*_}"
  case "$model" in corpus_*) model="$here/corpus/${model#corpus_}.onnx" ;; esac
  "$gopt" compare "$model" --task "$task" --cluster "$cl" --budget "$b1" --threads 2 --json --methods go \
    --policy "$policy" >"$out/$id.1k.go" 2>/dev/null || echo "eval_learned_go: $id: zero-shot go failed" >&2
  ks=1k
  if [ -f "$base/$id.5k.json" ]; then  # a base without the 5K file (zero-shot only) gets no fine-tuning
    ks="1k 5k"
    "$gopt" compare "$model" --task "$task" --cluster "$cl" --budget "$b2" --threads 2 --json --methods go \
      --policy "$policy" --finetune "$ft" >"$out/$id.5k.go" 2>/dev/null || echo "eval_learned_go: $id: fine-tuned go failed" >&2
  fi
  for k in $ks; do
    /usr/bin/python3 - "$base/$id.$k.json" "$out/$id.$k.go" "$out/$id.$k.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
go = [r for r in json.load(open(sys.argv[2]))["results"] if r["method"] == "go"]
d["results"] = [go[0] if r["method"] == "go" and go else r for r in d["results"]]
json.dump(d, open(sys.argv[3], "w"), indent=1)
EOF
    rm -f "$out/$id.$k.go"
  done
done
/usr/bin/python3 "$here/tools/eval_learned.py" "$out" "$b1" "$b2" "$ft" learned
