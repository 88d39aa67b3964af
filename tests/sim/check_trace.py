#!/usr/bin/python3
"""check_trace.py DIR: validates every tN.out.json (gopt simulate --json) and tN.trace.json pair:
the result has a positive step time and per-device numbers; the trace is trace-event JSON whose
events all have name/ph/ts/dur/pid/tid, complete events do not overlap on one track, metadata
names every track, and the last event ends at the step time."""
import glob, json, os, sys

bad = 0
outs = sorted(glob.glob(os.path.join(sys.argv[1], "t*.out.json")))
for out in outs:
    tr = out.replace(".out.json", ".trace.json")
    try:
        r = json.load(open(out))
        t = json.load(open(tr))
        assert r["step_time_s"] > 0, "step time"
        assert len(r["devices"]) >= 1 and all(d["peak_mem_bytes"] >= 0 for d in r["devices"])
        ev = t["traceEvents"]
        tracks = {}
        named = set()
        for e in ev:
            for k in ("name", "ph", "ts", "dur", "pid", "tid"):
                assert k in e, f"event without {k}: {e}"
            if e["ph"] == "M":
                named.add((e["pid"], e["tid"]))
                continue
            assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0, e
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
        end = 0
        for key, spans in tracks.items():
            assert key in named, f"track {key} has no thread_name"
            spans.sort()
            for (a, da), (b, db) in zip(spans, spans[1:]):
                if da > 0 and db > 0:
                    assert a + da <= b + 1e-6 * max(1.0, b), f"overlap on {key}: {a}+{da} > {b}"
            end = max([end] + [s + d for s, d in spans])
        step = r["step_time_s"] * 1e6
        assert abs(end - step) <= 1e-6 * step + 1e-6, f"last event {end} vs step {step}"
        assert r["kernels"] + r["transfers"] == sum(len(s) for s in tracks.values())
    except Exception as ex:  # noqa: BLE001
        bad += 1
        print(f"FAIL {out} ({r.get('model') if 'r' in dir() else '?'}): {ex}")
print(f"check_trace: {len(outs)} results, {bad} bad")
sys.exit(1 if bad or not outs else 0)
