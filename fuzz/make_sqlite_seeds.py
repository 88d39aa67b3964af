"""make_sqlite_seeds.py OUT_DIR: writes the seed corpus of fuzz/fuzz_sqlite_load.c (run with Debian's
/usr/bin/python3): a cost database and a run history with gopt's own schemas (src/cost/costdb_sqlite.c,
src/history/history.c) and a few rows, and databases whose tables were created by someone else: no
NOT NULL constraints, NULL keys, text / negative / infinite seconds, a blob where text is expected
(regress-*: the ones that crashed the loader or loaded as a valid database before it checked rows,
and a desc that is not UTF-8, which the JSON save used to drop silently). 512-byte pages keep each file a few KB, so the fuzzer's mutations reach every page."""
import os
import sqlite3
import sys

COSTS = ("CREATE TABLE costs(sig TEXT NOT NULL, device TEXT NOT NULL, op TEXT, desc TEXT, seconds REAL NOT NULL, "
         "reps INTEGER, threads INTEGER, updated TEXT DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY(sig, device));"
         "CREATE TABLE steps(model TEXT NOT NULL, device TEXT NOT NULL, seconds REAL NOT NULL, "
         "PRIMARY KEY(model, device));")
RUNS = ("CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, "
        "model_hash TEXT NOT NULL, model TEXT, command TEXT, task TEXT, cluster TEXT, method TEXT, seed INTEGER, "
        "objective REAL, feasible INTEGER, evaluations INTEGER, seconds REAL, decisions TEXT, decisions_file TEXT, "
        "version TEXT);CREATE INDEX runs_key ON runs(model_hash, cluster, task);")
LOOSE_COSTS = "CREATE TABLE costs(sig, device, op, desc, seconds, reps, threads);CREATE TABLE steps(model, device, seconds);"
LOOSE_RUNS = ("CREATE TABLE runs(id, time, model_hash, model, command, task, cluster, method, seed, objective, "
              "feasible, evaluations, seconds, decisions, decisions_file, version);")


def make(path, script, rows):
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size=512")
    db.executescript(script)
    for sql, args in rows:
        db.execute(sql, args)
    db.commit()
    db.execute("VACUUM")
    db.close()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cost = "INSERT INTO costs(sig, device, op, desc, seconds, reps, threads) VALUES (?,?,?,?,?,?,?)"
    step = "INSERT INTO steps(model, device, seconds) VALUES (?,?,?)"
    run = ("INSERT INTO runs(time, model_hash, model, command, task, cluster, method, seed, objective, feasible, "
           "evaluations, seconds, decisions, decisions_file, version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
    make(os.path.join(out, "costdb.sqlite"), COSTS, [
        (cost, ("00000000deadbeef", "cpu x2", "Conv", "Conv f32[1,3,8,8] -> f32[1,4,8,8]", 1.5e-5, 5, 2)),
        (cost, ("0123456789abcdef", "cpu x2", "Relu", "Relu f32[1,4,8,8]", 2e-7, 9, 2)),
        (cost, ("0123456789abcdef", "other", "Relu", "Relu f32[1,4,8,8]", 3e-7, 9, 1)),
        (step, ("resnet18", "cpu x2", 0.012))])
    make(os.path.join(out, "history.sqlite"), RUNS, [
        (run, ("2026-01-01 00:00:00", "00000000000000ff", "gpt2:layers=1", "optimize", "placement", "4xV100-nvlink",
               "brkga", 1, 1.25e-3, 1, 400, 0.5, '{"format":"gopt-decisions"}', "d.json", "0.1")),
        (run, ("2026-01-01 00:00:01", "00000000000000ff", "gpt2:layers=1", "compare", "placement", "4xV100-nvlink",
               "anneal", 2, 1.5e-3, 0, 400, 0.4, None, None, None))])
    make(os.path.join(out, "loose-costdb.sqlite"), LOOSE_COSTS, [
        (cost, ("00000000deadbeef", None, None, None, -1.0, None, None)),
        (cost, ("00000000deadbeef", "h", b"\x00\x01", "d", 1.0, "x", "y")),
        (cost, (None, "h", "Relu", None, 1.0, 1, 1)),
        (step, ("m", "h", "text"))])
    ok = (cost, ("0000000000000002", "h", "Relu", "Relu", 1e-6, 1, 1))
    # fixed findings: each loaded as a valid database before, or crashed
    make(os.path.join(out, "regress-negative-seconds.sqlite"), LOOSE_COSTS, [
        ok, (cost, ("0000000000000001", "h", "Add", "Add", -1.0, 1, 1))])
    make(os.path.join(out, "regress-inf-seconds.sqlite"), LOOSE_COSTS, [
        ok, (cost, ("0000000000000001", "h", "Add", "Add", float("inf"), 1, 1))])
    # seeds with loose tables that loaded without harm before
    make(os.path.join(out, "text-seconds.sqlite"), LOOSE_COSTS, [
        ok, (step, ("m", "h", "abc"))])
    make(os.path.join(out, "regress-non-utf8-desc.sqlite"), LOOSE_COSTS, [
        ok, ("INSERT INTO costs VALUES ('0000000000000003', 'h', 'Relu', CAST(X'52E56C75' AS TEXT), 1e-6, 1, 1)", ())])
    make(os.path.join(out, "regress-null-step-model.sqlite"), LOOSE_COSTS, [ok, (step, (None, "h", 0.5))])
    make(os.path.join(out, "null-device.sqlite"), LOOSE_COSTS, [
        (cost, ("00000000deadbeef", None, "Relu", "Relu", 1.0, 1, 1)),
        (step, ("m", None, 1.0))])
    make(os.path.join(out, "loose-history.sqlite"), LOOSE_RUNS, [
        (run.replace("time,", "id, time,").replace("(?,", "(?,?,", 1),
         (None, None, None, None, None, None, None, None, "x", b"\x00", None, None, None, b"\xff\xfe", None, 7)),
        (run.replace("time,", "id, time,").replace("(?,", "(?,?,", 1),
         (1, "t", "zz", "m", "c", "placement", "V100", "m", 1, 1.0, 1, 1, 1.0, "{}", "f", "v"))])


if __name__ == "__main__":
    main()
