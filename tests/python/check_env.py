#!/usr/bin/python3
"""check_env.py GOPT_BIN: the contract of gopt.Env, the Gymnasium-style environment: spaces and
observation shapes, the dataflow CSR against python-onnx's reading of the same model (exported
with `gopt convert`), graph mode and node mode (Placeto's: rewards telescope to the final
vector's reward), determinism with a seed, evaluate_batch against one-by-one evaluation, rewards
ordered like gopt_env_result_cmp (fitting in memory first), and errors as gopt.Error."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

import gopt

GOPT = sys.argv[1]
from pycase import case, failures  # noqa: E402




def raises(fn, pattern):
    try:
        fn()
    except gopt.Error as e:
        assert pattern in str(e), "message '%s' lacks '%s'" % (e, pattern)
        assert "\n" not in str(e)
        return str(e)
    raise AssertionError("no gopt.Error (expected '%s')" % pattern)


@case("graph mode: spaces, observation, step, episode end")
def _():
    env = gopt.Env("resnet50", "placement", "4xV100-nvlink", seed=0)
    n_ids = len(env.node_mask)
    assert isinstance(env.action_space, gopt.spaces.MultiDiscrete)
    assert env.action_space.shape == (env.nvars,) and (env.action_space.nvec == 4).all()
    assert env.nvars == gopt.load("resnet50").node_count == env.node_mask.sum()
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs), "observation outside observation_space"
    assert obs["node_features"].shape == (n_ids, 24) and obs["node_features"].dtype == np.float32
    assert obs["indptr"].shape == (n_ids + 1,) and obs["indptr"][-1] == len(obs["indices"])
    assert (obs["x"] == env.x_default).all() and (obs["x"] == 0).all()
    assert info["reference_objective"] == info["objective"] and info["feasible"]
    for _ in range(3):
        a = env.action_space.sample()
        assert env.action_space.contains(a)
    obs2, r, term, trunc, info2 = env.step(a)
    assert term and not trunc and (obs2["x"] == a).all()
    ev = env.evaluate(a)
    assert r == ev["reward"] and info2["objective"] == ev["objective"]
    raises(lambda: env.step(a), "the episode is over")
    env.reset()
    raises(lambda: env.step(np.zeros(env.nvars - 1)), "expected shape")
    bad = a.copy()
    bad[5] = 4
    raises(lambda: env.step(bad), "action[5] = 4: expected an integer in [0, 4)")
    env.reset()
    _, r, _, _, _ = env.step(env.x_default)   # a float vector of integral values is a valid action
    assert r == 0.0, r


@case("CSR edges equal python-onnx's dataflow of the exported model")
def _():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        subprocess.run([GOPT, "convert", "inception_v3", "-o", path], check=True, capture_output=True)
        ref = onnx.load(path, load_external_data=False).graph
        producer = {o: n.name for n in ref.node for o in n.output}
        want = {(producer[i], n.name) for n in ref.node for i in n.input if i in producer and producer[i] != n.name}
        for model in ["inception_v3", path]:
            env = gopt.Env(model, "placement", "2xV100")
            names = env.model.node_names()
            ip, ix = env.indptr, env.indices
            got = {(names[u], names[v]) for u in range(len(ip) - 1) for v in ix[ip[u]:ip[u + 1]]}
            assert got == want, "%s: %d edges, python-onnx %d (%d differ)" % (model, len(got), len(want), len(got ^ want))
            assert all((np.diff(ix[ip[u]:ip[u + 1]]) > 0).all() for u in range(len(ip) - 1)), "rows not sorted"
            feats = env.node_features
            assert (feats[env.node_mask].any(axis=1)).all() and not feats[~env.node_mask].any()


@case("determinism: the same seed gives the same samples and rewards, another seed differs")
def _():
    def run(seed):
        env = gopt.Env("resnet50", "placement", "4xV100-nvlink", seed=seed)
        out = []
        for k in range(3):
            env.reset(seed=seed + 10 * k)
            a = env.action_space.sample()
            _, r, _, _, _ = env.step(a)
            out.append((a.tolist(), r))
        return out
    a, b, c = run(5), run(5), run(6)
    assert a == b, (a, b)
    assert a != c, "seed 6 gave seed 5's rewards"


@case("joint task: Box action space with integer variables; sample() inside; step works")
def _():
    env = gopt.Env("inception_v3", "joint", "2xV100", seed=3)
    sp = env.action_space
    assert isinstance(sp, gopt.spaces.Box) and sp.shape == (env.nvars,)
    kinds = set(env.var_kind.tolist())
    assert kinds == {0, 1, 2}, kinds
    a = sp.sample()
    assert sp.contains(a) and (a[env.discrete] == np.floor(a[env.discrete])).all()
    env.reset()
    _, r, term, _, info = env.step(a)
    assert term and np.isfinite(r)
    raises(lambda: gopt.Env("inception_v3", "joint", "2xV100", mode="node"), "mode 'node' needs discrete variables")


@case("node mode (Placeto): one variable per step, rewards telescope to the final reward")
def _():
    env = gopt.Env("resnet50", "placement", "2xV100", mode="node", seed=0)
    assert isinstance(env.action_space, gopt.spaces.Discrete) and env.action_space.n == 2
    obs, info = env.reset(seed=0)
    assert obs["cursor"] == 0
    total, steps, done = 0.0, 0, False
    rng = np.random.default_rng(0)
    while not done:
        a = int(rng.integers(2))
        obs, r, done, trunc, info = env.step(a)
        steps += 1
        total += r
        assert obs["cursor"] == steps and obs["x"][steps - 1] == a and not trunc
    assert steps == env.nvars
    final = env.evaluate(obs["x"])
    assert abs(total - final["reward"]) < 1e-9, (total, final["reward"])
    assert info["objective"] == final["objective"]
    env.reset()
    raises(lambda: env.step(2), "expected an integer in [0, 2)")
    raises(lambda: env.step(0.5), "expected an integer in [0, 2)")
    fus = gopt.Env("resnet50", "fusion", "V100", mode="node")
    assert fus.action_space.n == 2 and fus.nvars > 0


@case("evaluate_batch equals one-by-one evaluation; reward order follows the objective")
def _():
    env = gopt.Env("inception_v3", "placement", "4xV100-nvlink", seed=2)
    xs = np.stack([env.action_space.sample() for _ in range(40)] + [env.x_default, env.baseline("metis")])
    b = env.evaluate_batch(xs)
    for i, x in enumerate(xs):
        e = env.evaluate(x)
        for k in ("objective", "step_time_s", "peak_mem_bytes", "mem_over_bytes", "feasible", "reward"):
            assert b[k][i] == e[k], (i, k, b[k][i], e[k])
    assert b["reward"][-2] == 0.0, "the default's reward relative to itself"
    assert b["feasible"].all()
    o, r = b["objective"], b["reward"]
    for i in range(len(o)):
        for j in range(len(o)):
            if o[i] < o[j]:
                assert r[i] >= r[j], (i, j)
    raises(lambda: env.evaluate_batch(np.zeros((3, env.nvars + 1))), "expected an (n, %d) array" % env.nvars)
    bad = xs[:3].copy()
    bad[1, 7] = 9
    raises(lambda: env.evaluate_batch(bad), "batch item 1: task: x[7]")


@case("memory: an over-memory result ranks below every fitting one")
def _():
    with tempfile.TemporaryDirectory() as d:
        cl = os.path.join(d, "small.json")
        with open(cl, "w") as f:
            f.write('{"name": "small", "devices": [{"preset": "V100", "memory": 8e7, "count": 2}],'
                    ' "links": [{"name": "nvlink", "devices": [0, 1], "bw": 25e9, "latency_us": 5}]}')
        env = gopt.Env("resnet50", "placement", cl, seed=0)
        xs = np.stack([env.x_default, env.baseline("metis")] + [env.action_space.sample() for _ in range(30)])
        b = env.evaluate_batch(xs)
        assert not b["feasible"][0], "everything on one 80 MB device should not fit"
        assert b["feasible"].any(), "no sample fits"
        assert b["reward"][~b["feasible"]].max() < -1.0 <= b["reward"][b["feasible"]].min()
        assert not env.reference_result["feasible"]  # the default is the reference here
        assert b["reward"][b["feasible"]].min() > 0, "fitting beats the over-memory default"


@case("errors: bad task, mode, model, cluster; closed environment")
def _():
    raises(lambda: gopt.Env("resnet50", "placment", "2xV100"), "task: unknown task 'placment'")
    raises(lambda: gopt.Env("resnet50", "placement", "2xV100", mode="edge"), "mode: expected 'graph' or 'node'")
    raises(lambda: gopt.Env("resnet50", "placement", "2xV100", reference="best"), "reference: expected")
    raises(lambda: gopt.Env("resnet51", "placement", "2xV100"), "resnet51")
    raises(lambda: gopt.Env("resnet50", "placement", "2xV999"), "V999")
    env = gopt.Env("resnet50", "placement", "2xV100")
    env.close()
    raises(env.reset, "closed")


if failures:
    print("check_env: %d case(s) failed: %s" % (len(failures), ", ".join(failures)), file=sys.stderr)
    sys.exit(1)
print("check_env: the environment keeps its contract")
