"""env.py: gopt.Env, a Gymnasium-style environment over a gopt task environment (task.h): the
decision variables of a task (placement, fusion, schedule, memory, joint) on one model and
cluster, scored by gopt's step simulator. docs/PYTHON.md describes the observation, the actions
and the reward."""
import ctypes

import numpy as np

from . import _lib as L
from . import model as M
from . import spaces
from ._lib import Error, check

VAR_DEVICE, VAR_PRIORITY, VAR_FUSE = 0, 1, 2
_KIND_NAMES = {VAR_DEVICE: "device", VAR_PRIORITY: "priority", VAR_FUSE: "fuse"}


# gopt_env_result as a numpy record (4 doubles, an int, padding to 8 bytes)
_RESULT_DT = np.dtype({"names": ["objective", "step_time", "peak_mem", "mem_over", "feasible"],
                       "formats": ["<f8", "<f8", "<f8", "<f8", "<i4"], "offsets": [0, 8, 16, 24, 32],
                       "itemsize": ctypes.sizeof(L.EnvResult)})


def _ro(a):
    a.setflags(write=False)
    return a


class Env:
    """Env(model, task, cluster, mode="graph", seed=None, reference="default", mem_penalty=0,
    threads=0, batch=None)

    model: a gopt.Model, an .onnx path or a zoo spec; cluster: a shorthand ("2xV100") or a cluster
    JSON file. mode "graph": one step decides every variable at once (GO's setting; the episode
    has one step); mode "node": one step decides one variable, in gopt's variable order
    (topological within each kind; Placeto's setting; the episode has nvars steps, discrete tasks
    only: placement and fusion). reference: what rewards are relative to: "default" (the
    compiler's default decisions) or "baseline" (the best of the task's standard baselines).
    mem_penalty: the objective's over-memory factor (0: gopt's default 10).

    Reward (gopt_learn_reward, consistent with gopt_env_result_cmp): for a result that fits in
    memory, max(-1, (ref - objective) / ref) (0 = as good as the reference, 0.2 = 20% faster);
    over memory, -1.01 - min(10, bytes over / smallest device memory), below every fitting
    result. Graph mode: the reward of the decided vector. Node mode: the change of that score
    caused by the step (score after - score before), so an episode's rewards sum to the final
    vector's reward minus the start's (0 when starting from the default with reference
    "default")."""

    metadata = {"render_modes": []}
    _env = _ws = None  # so close() works on a half-built environment

    def __init__(self, model, task="placement", cluster="2xV100", mode="graph", seed=None, reference="default",
                 mem_penalty=0.0, threads=0, batch=None):
        if mode not in ("graph", "node"):
            raise Error("mode: expected 'graph' or 'node', got %r" % (mode,), -1)
        if reference not in ("default", "baseline"):
            raise Error("reference: expected 'default' or 'baseline', got %r" % (reference,), -1)
        self.model = M.load(model, batch=batch)
        self.cluster = M.cluster(cluster)
        self.task, self.mode, self.reference = task, mode, reference
        self._env = self._ws = None
        err = L.new_error()
        eo = L.EnvOpts(M._task_id(task), None, float(mem_penalty), int(threads))
        env = ctypes.c_void_p()
        check(L.lib.gopt_env_new(self.model._g, self.cluster._p, ctypes.byref(eo), ctypes.byref(env),
                                 ctypes.byref(err)), err)
        self._env = env
        self._ws = L.lib.gopt_env_ws_new(env)
        if not self._ws:
            raise Error("out of memory", -2)
        self.nvars = int(L.lib.gopt_env_nvars(env))
        vars_ = np.ctypeslib.as_array(L.lib.gopt_env_vars(env), (self.nvars,)) if self.nvars else None
        self.var_node = _ro(np.array([v[0] for v in vars_] if self.nvars else [], np.int32))
        self.var_kind = _ro(np.array([v[1] for v in vars_] if self.nvars else [], np.int32))
        self.var_card = _ro(np.array([v[2] for v in vars_] if self.nvars else [], np.int32))
        self.discrete = _ro(self.var_kind != VAR_PRIORITY)
        if mode == "node" and not self.discrete.all():
            raise Error("mode 'node' needs discrete variables; the %s task has continuous priorities "
                        "(use mode='graph')" % task, -1)
        if self.nvars == 0:
            raise Error("the %s task has no decision variables on %s" % (task, self.model.spec), -1)
        self.x_default = np.zeros(self.nvars + 1)
        L.lib.gopt_env_default(env, M._dp(self.x_default))
        self.x_default = _ro(self.x_default[:self.nvars].copy())
        # static parts of the observation
        n_ids = len(self.model.alive())
        feat = np.zeros((n_ids, L.GOPT_ENV_NFEAT), np.float32)
        check(L.lib.gopt_env_node_features(env, feat.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                           ctypes.byref(err)), err)
        self.node_features = _ro(feat)
        indptr, indices = self.model.edges_csr()
        self.indptr, self.indices = _ro(indptr), _ro(indices)
        self.node_mask = _ro(self.model.alive())
        # the reference result rewards are relative to
        self._default = self._evaluate(self.x_default)  # (result, repaired), reused by reset()
        self._ref = L.EnvResult()
        if reference == "baseline":
            check(L.lib.gopt_learn_reference(env, ctypes.byref(self._ref), None, ctypes.byref(err)), err)
        else:
            self._ref = self._default[0]
        self.reference_result = M.result_dict(self._ref)
        # spaces
        hi = np.where(self.discrete, self.var_card - 1, 1.0).astype(np.float64)
        if mode == "node":
            self.action_space = spaces.Discrete(int(self.var_card.max()))
        elif self.discrete.all():
            self.action_space = spaces.MultiDiscrete(self.var_card)
        else:
            self.action_space = spaces.Box(0.0, hi, (self.nvars,), np.float64, integer=self.discrete)
        obs = {"node_features": spaces.Box(-np.inf, np.inf, feat.shape, np.float32),
               "node_mask": spaces.Box(0, 1, (n_ids,), bool),
               "indptr": spaces.Box(0, len(indices), indptr.shape, np.int64),
               "indices": spaces.Box(0, max(n_ids - 1, 0), indices.shape, np.int32),
               "var_node": spaces.Box(0, max(n_ids - 1, 0), (self.nvars,), np.int32),
               "x": spaces.Box(0.0, hi, (self.nvars,), np.float64, integer=self.discrete)}
        if mode == "node":
            obs["cursor"] = spaces.Discrete(self.nvars + 1)
        self.observation_space = spaces.Dict(obs)
        self.np_random = np.random.default_rng(seed)
        self.action_space.seed(seed)
        self.observation_space.seed(seed)
        self._x = None
        self._cursor = 0
        self._done = True
        self._score = 0.0

    # ---- lifetime ----------------------------------------------------------------------------
    def close(self):
        if self._ws:
            L.lib.gopt_env_ws_free(self._ws)
            self._ws = None
        if self._env:
            L.lib.gopt_env_free(self._env)
            self._env = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _alive(self):
        if not self._env:
            raise Error("the environment is closed", -1)

    # ---- evaluation --------------------------------------------------------------------------
    def _vec(self, x):
        a = np.asarray(x, dtype=np.float64)
        if a.shape != (self.nvars,):
            raise Error("decision vector: expected shape (%d,), got %s" % (self.nvars, a.shape), -1)
        return np.ascontiguousarray(a)

    def _evaluate(self, x, idx=None):
        err, r, rep = L.new_error(), L.EnvResult(), ctypes.c_size_t()
        if idx is None:
            rc = L.lib.gopt_env_evaluate(self._ws, M._dp(x), ctypes.byref(r), ctypes.byref(rep), ctypes.byref(err))
        else:
            ii = (ctypes.c_size_t * len(idx))(*idx)
            rc = L.lib.gopt_env_evaluate_delta(self._ws, M._dp(x), ii, len(idx), ctypes.byref(r), ctypes.byref(err))
        check(rc, err)
        return r, rep.value

    def reward_of(self, r):
        """The reward of a gopt_env_result (see the class docstring)."""
        return float(L.lib.gopt_learn_reward(self._env, ctypes.byref(r), ctypes.byref(self._ref)))

    def evaluate(self, x):
        """Evaluates one decision vector: a dict with objective, step_time_s, peak_mem_bytes,
        mem_over_bytes, feasible, reward and repaired (fusion bits treated as 0)."""
        self._alive()
        r, rep = self._evaluate(self._vec(x))
        d = M.result_dict(r)
        d.update({"reward": self.reward_of(r), "repaired": rep})
        return d

    def evaluate_batch(self, xs):
        """Evaluates n decision vectors (an (n, nvars) array) in parallel on the library's threads
        (gopt_env_evaluate_batch; each row's result equals a sequential evaluation). Returns a dict
        of arrays of length n: objective, step_time_s, peak_mem_bytes, mem_over_bytes, feasible
        (bool), reward. Raises gopt.Error naming the first bad row."""
        self._alive()
        a = np.ascontiguousarray(np.asarray(xs, dtype=np.float64))
        if a.ndim != 2 or a.shape[1] != self.nvars:
            raise Error("evaluate_batch: expected an (n, %d) array, got shape %s" % (self.nvars, a.shape), -1)
        n = a.shape[0]
        out = (L.EnvResult * max(n, 1))()
        err = L.new_error()
        check(L.lib.gopt_env_evaluate_batch(self._env, M._dp(a), n, out, ctypes.byref(err)), err)
        rec = np.frombuffer(out, _RESULT_DT, count=n)
        res = {"objective": rec["objective"].copy(), "step_time_s": rec["step_time"].copy(),
               "peak_mem_bytes": rec["peak_mem"].copy(), "mem_over_bytes": rec["mem_over"].copy(),
               "feasible": rec["feasible"].astype(bool)}
        res["reward"] = np.array([self.reward_of(out[i]) for i in range(n)], np.float64)
        return res

    @property
    def evaluations(self):
        """Evaluations counted so far by this environment (all threads)."""
        return int(L.lib.gopt_env_evaluations(self._env))

    def baseline(self, name):
        """The decision vector of a heuristic baseline ("metis", "metis+mem_greedy", ...)."""
        self._alive()
        x, err = np.zeros(self.nvars + 1), L.new_error()
        check(L.lib.gopt_baseline_run(L.s(name), self._env, M._dp(x), ctypes.byref(err)), err)
        return x[:self.nvars].copy()

    def save_decisions(self, x, path):
        """Writes decision vector x as a decisions file (`gopt simulate --decisions path`)."""
        self._alive()
        M.save_decisions(self.model, self._env, self._vec(x), path)

    # ---- the Gymnasium API -------------------------------------------------------------------
    def _obs(self):
        o = {"node_features": self.node_features, "node_mask": self.node_mask, "indptr": self.indptr,
             "indices": self.indices, "var_node": self.var_node, "x": self._x.copy()}
        if self.mode == "node":
            o["cursor"] = self._cursor
        return o

    def _info(self, r, rep):
        d = M.result_dict(r)
        d.update({"repaired": rep, "reference_objective": self._ref.objective, "evaluations": self.evaluations})
        if self.mode == "node":
            d["cursor"] = self._cursor
        return d

    def reset(self, seed=None, options=None):
        """Starts an episode from the default decisions (or options["x"], a decision vector).
        seed reseeds env.np_random and the action space's sampler. Returns (obs, info)."""
        self._alive()
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
            self.action_space.seed(seed)
        start = None if not options else options.get("x")
        self._x = self._vec(self.x_default if start is None else start).copy()
        self._cursor = 0
        if start is None and self.mode == "graph":
            r, rep = self._default  # the simulator is deterministic: no need to evaluate again
        else:  # node mode: the workspace must hold the start for the incremental steps
            r, rep = self._evaluate(self._x)
        self._score = self.reward_of(r)
        self._done = False
        return self._obs(), self._info(r, rep)

    def step(self, action):
        """Applies an action; returns (obs, reward, terminated, truncated, info). Graph mode: the
        action is the whole decision vector (action_space). Node mode: the value of variable
        obs["cursor"] (an int below its card, env.var_card[cursor])."""
        self._alive()
        if self._done:
            raise Error("step: the episode is over (call reset)", -1)
        if self.mode == "graph":
            x = self._vec(action)
            bad = np.nonzero(self.discrete & ((x < 0) | (x >= self.var_card) | (np.floor(x) != x)))[0]
            if len(bad):  # (priorities are checked by the library: finite)
                i = int(bad[0])
                raise Error("step: action[%d] = %g: expected an integer in [0, %d) (%s of node '%s')" % (
                    i, x[i], self.var_card[i], _KIND_NAMES[int(self.var_kind[i])],
                    L.lib.gopt_node_name(self.model._g, int(self.var_node[i])).decode()), -1)
            self._x = x.copy()
            r, rep = self._evaluate(self._x)
            reward = self.reward_of(r)
            self._done = True
        else:
            i = self._cursor
            try:
                a = int(action)
            except (TypeError, ValueError):
                raise Error("step: action %r is not an integer" % (action,), -1) from None
            if a != action or not 0 <= a < self.var_card[i]:
                raise Error("step: action %r for variable %d (%s of node '%s'): expected an integer in [0, %d)" % (
                    action, i, _KIND_NAMES[int(self.var_kind[i])],
                    L.lib.gopt_node_name(self.model._g, int(self.var_node[i])).decode(), self.var_card[i]), -1)
            self._x[i] = a
            r, rep = self._evaluate(self._x, [i])
            score = self.reward_of(r)
            reward, self._score = score - self._score, score
            self._cursor += 1
            self._done = self._cursor == self.nvars
        return self._obs(), reward, self._done, False, self._info(r, rep)

    def render(self):
        return None
