#!/usr/bin/python3
"""reinforce_placement.py: trains a small REINFORCE agent in pure numpy on gopt's placement
environment (gopt.Env, graph mode: one step places every node, GO's setting) and compares its
placements with random placement, the compiler's default (everything on device 0) and METIS.

The policy is a softmax over devices per node with logits = node_features @ W + b[node]: a linear
map of gopt's node features shared by all nodes plus a per-node bias. Each iteration samples a
batch of placements, scores them with env.evaluate_batch (parallel, in the library), and takes a
REINFORCE step with the batch's mean reward as the baseline (Adam). Everything random comes from
--seed. Exits non-zero unless the trained agent's mean objective beats random placement's (the
ctest runs it that way).

    /usr/bin/python3 python/examples/reinforce_placement.py [--model inception_v3]
        [--cluster 2xV100] [--iters 300] [--batch 64] [--lr 0.03] [--seed 0]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gopt  # noqa: E402


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class Adam:
    def __init__(self, params, lr):
        self.p, self.lr, self.t = params, lr, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads):  # ascent: params += lr * adam(grad)
        self.t += 1
        for p, g, m, v in zip(self.p, grads, self.m, self.v):
            m += 0.1 * (g - m)
            v += 0.001 * (g * g - v)
            mh, vh = m / (1 - 0.9 ** self.t), v / (1 - 0.999 ** self.t)
            p += self.lr * mh / (np.sqrt(vh) + 1e-8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--cluster", default="2xV100")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", type=int, default=256, help="placements sampled to score each agent")
    a = ap.parse_args()

    env = gopt.Env(a.model, "placement", a.cluster, mode="graph", seed=a.seed)
    rng = np.random.default_rng(a.seed)
    obs, info = env.reset(seed=a.seed)
    feat = obs["node_features"][env.var_node]          # (nvars, F): the placed nodes' features
    nv, nd = env.nvars, int(env.var_card[0])
    W = np.zeros((feat.shape[1], nd))
    b = np.zeros((nv, nd))
    opt = Adam([W, b], a.lr)

    def sample(k):
        p = softmax(feat @ W + b)                      # (nv, nd)
        u = rng.random((k, nv, 1))
        acts = (u > np.cumsum(p, axis=1)[None]).sum(axis=2)
        return np.minimum(acts, nd - 1), p

    for it in range(a.iters):
        acts, p = sample(a.batch)
        res = env.evaluate_batch(acts)
        adv = res["reward"] - res["reward"].mean()
        # d/dlogits of sum_i log p(a_i) = onehot(a) - p, weighted by the advantage
        onehot = np.eye(nd)[acts]                        # (k, nv, nd)
        g_logits = ((onehot - p[None]) * adv[:, None, None]).mean(axis=0)
        opt.step([feat.T @ g_logits, g_logits])
        if it % 10 == 0 or it == a.iters - 1:
            print("iter %3d  mean reward %+.4f  mean objective %.4f ms" % (
                it, res["reward"].mean(), 1e3 * res["objective"].mean()))

    trained = env.evaluate_batch(sample(a.eval)[0])
    random_x = np.stack([env.action_space.sample() for _ in range(a.eval)])
    rand = env.evaluate_batch(random_x)
    greedy = env.evaluate(np.argmax(feat @ W + b, axis=1))
    default = env.evaluate(env.x_default)
    metis = env.evaluate(env.baseline("metis"))
    print("%s on %s, %d nodes placed, %d evaluations" % (a.model, a.cluster, nv, env.evaluations))
    print("random placement   mean objective %.4f ms (feasible %d/%d)" % (
        1e3 * rand["objective"].mean(), rand["feasible"].sum(), a.eval))
    print("trained agent      mean objective %.4f ms (feasible %d/%d), greedy %.4f ms" % (
        1e3 * trained["objective"].mean(), trained["feasible"].sum(), a.eval, 1e3 * greedy["objective"]))
    print("default (device 0) %.4f ms;  metis %.4f ms" % (1e3 * default["objective"], 1e3 * metis["objective"]))
    if not trained["objective"].mean() < rand["objective"].mean():
        print("reinforce_placement: FAIL: the trained agent does not beat random placement", file=sys.stderr)
        return 1
    print("reinforce_placement: ok: trained agent's mean objective is %.1f%% below random placement's" % (
        100 * (1 - trained["objective"].mean() / rand["objective"].mean())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
