"""model.py: models (an ONNX file or a zoo spec) and what the gopt command does with them, called
through libgopt: info, simulate, optimize and compare. Results are dicts with the same keys and
values as the CLI's --json output (`gopt info/simulate/optimize/compare --json`)."""
import ctypes
import json
import os
import tempfile
import time

import numpy as np

from . import _lib as L
from ._lib import Error, check

TASKS = ("placement", "fusion", "schedule", "memory", "joint")
_COSTS = {"analytical": 0, "measured": 1, "auto": 2}

_NODE_DT = np.dtype([("name", "<u4"), ("type", "<u4"), ("op", "<u2"), ("flags", "<u2"), ("n_in", "<u2"),
                     ("n_out", "<u2"), ("in", "<u4"), ("out", "<u4"), ("attr", "<u4"), ("n_attr", "<u2"),
                     ("pad", "<u2")])
_TENSOR_DT = np.dtype([("name", "<u4"), ("dtype", "u1"), ("rank", "u1"), ("flags", "<u2"), ("dims", "<u4"),
                       ("producer", "<i4"), ("out_index", "<i4"), ("first_use", "<i4"), ("cdata", "<i4"),
                       ("pad", "<u4")])
_SLOT_DT = np.dtype([("tensor", "<i4"), ("node", "<i4"), ("next_use", "<i4")])
_N_DEAD = 1


def _view(arr, dtype):
    """A read-only numpy copy of a GOPT_ARRAY's n elements."""
    if arr.n == 0:
        return np.zeros(0, dtype)
    buf = (ctypes.c_char * (arr.n * dtype.itemsize)).from_address(arr.a)
    return np.frombuffer(bytes(buf), dtype)


def _looks_like_file(model):
    return "/" in model or model.endswith(".onnx") or model.endswith(".hlo") or model.endswith(".txt")


class Cluster:
    """A parsed cluster (a shorthand such as "4xV100-nvlink" or a cluster JSON file)."""

    def __init__(self, spec):
        err = L.new_error()
        p = ctypes.POINTER(L.Cluster)()
        check(L.lib.gopt_cluster_parse(L.s(spec), ctypes.byref(p), ctypes.byref(err)), err)
        self._p = p
        self.spec = spec

    def __del__(self):
        if getattr(self, "_p", None):
            L.lib.gopt_cluster_free(self._p)
            self._p = None

    @property
    def name(self):
        return self._p.contents.name.decode()

    @property
    def devices(self):
        c = self._p.contents
        return [{"name": c.devices[k].name.decode(), "model": c.devices[k].model.decode(),
                 "kind": c.devices[k].kind.decode(), "mem_bytes": c.devices[k].mem_bytes}
                for k in range(c.n_devices)]

    @property
    def links(self):
        c = self._p.contents
        return [c.links[k].name.decode() for k in range(c.n_links)]


def cluster(spec):
    return spec if isinstance(spec, Cluster) else Cluster(spec)


class Model:
    """A model graph with inferred shapes. Build it with gopt.load()."""

    def __init__(self, spec, batch=None, training=False, fold=True):
        err = L.new_error()
        g = ctypes.c_void_p()
        self.spec = os.fspath(spec)
        hlo = _looks_like_file(self.spec) and L.lib.gopt_hlo_is_hlo_file(L.s(self.spec))
        if hlo:  # XLA HLO text: shapes come from the text, nothing to fold (as the CLI)
            rc = L.lib.gopt_hlo_load(L.s(self.spec), ctypes.byref(g), ctypes.byref(err))
            fold = False
        elif _looks_like_file(self.spec):
            rc = L.lib.gopt_onnx_load(L.s(self.spec), None, ctypes.byref(g), ctypes.byref(err))
        else:
            rc = L.lib.gopt_zoo_build(L.s(self.spec), ctypes.byref(g), ctypes.byref(err))
        self._g = g if g.value else None
        check(rc, err)
        if batch is not None:
            sym = L.lib.gopt_graph_batch_symbol(self._g)
            if not sym:
                raise Error("%s: batch: the model has no symbolic batch dimension" % self.spec, -1)
            L.lib.gopt_graph_bind_symbol(self._g, sym, int(batch))
        io = L.InferOpts(1 if fold else 0, 1)
        rc = L.lib.gopt_infer_shapes(self._g, ctypes.byref(io), ctypes.byref(err))
        check(rc, err, self.spec)
        if training:
            check(L.lib.gopt_train_build(self._g, None, ctypes.byref(err)), err, self.spec + ": training")

    def __del__(self):
        if getattr(self, "_g", None):
            L.lib.gopt_graph_free(self._g)
            self._g = None

    def __repr__(self):
        return "<gopt.Model %s: %d nodes>" % (self.spec, self.node_count)

    # ---- structure -----------------------------------------------------------------------------
    @property
    def node_count(self):
        """Live nodes."""
        return L.lib.gopt_graph_node_count(self._g)

    @property
    def name(self):
        return self._str(self._graph().name)

    def _graph(self):
        return L.Graph.from_address(self._g.value)

    def _str(self, sid):
        return L.lib.gopt_graph_str(self._g, sid).decode()

    def _nodes(self):
        return _view(self._graph().nodes, _NODE_DT)

    def node_names(self):
        """Name per node id (storage ids, dead nodes included: their names too)."""
        return [self._str(int(i)) for i in self._nodes()["name"]]

    def alive(self):
        """Bool per node id: the node is live (not removed)."""
        return (self._nodes()["flags"] & _N_DEAD) == 0

    def edges_csr(self):
        """The dataflow graph over node ids in CSR form: (indptr[n_ids + 1], indices), where
        indices[indptr[u]:indptr[u+1]] are the distinct live consumers of live node u's outputs,
        sorted. Dead nodes have no edges."""
        g = self._graph()
        nodes, tensors, slots = self._nodes(), _view(g.tensors, _TENSOR_DT), _view(g.slots, _SLOT_DT)
        n = len(nodes)
        alive = (nodes["flags"] & _N_DEAD) == 0
        ok = (slots["tensor"] >= 0) & (slots["node"] >= 0)
        cons = slots["node"][ok]
        prod = tensors["producer"][slots["tensor"][ok]]
        keep = prod >= 0
        prod, cons = prod[keep], cons[keep]
        keep = alive[prod] & alive[cons] & (prod != cons)
        pairs = np.unique(prod[keep].astype(np.int64) * n + cons[keep])
        src, dst = pairs // n, pairs % n
        indptr = np.zeros(n + 1, np.int64)
        np.add.at(indptr, src + 1, 1)
        return np.cumsum(indptr), dst.astype(np.int32)

    def info(self):
        """The model summary, as `gopt info MODEL --json` prints it: name, nodes, edges,
        instructions (HLO instruction count), hash (structural), tensors_count, params, param_bytes, trainable, flops, bytes, ir_bytes, ops (count per op
        type), flops_by_op."""
        st = L.GraphStats()
        L.lib.gopt_graph_stats_compute(self._g, ctypes.byref(st))
        ops, fb = {}, {}
        c = L.Cost()
        alive = self.alive()
        for i in np.nonzero(alive)[0]:
            t = L.lib.gopt_node_type(self._g, int(i)).decode()
            L.lib.gopt_node_cost(self._g, int(i), ctypes.byref(c))
            ops[t] = ops.get(t, 0) + 1
            fb[t] = fb.get(t, 0.0) + c.flops
        order = sorted(ops, key=lambda k: (-ops[k], k))
        return {"name": self.name, "nodes": st.nodes, "edges": st.edges,
                "instructions": L.lib.gopt_hlo_instruction_count(self._g),
                "hash": "%016x" % L.lib.gopt_graph_hash(self._g), "tensors_count": st.tensors,
                "params": st.params, "param_bytes": st.param_bytes, "trainable": st.trainable,
                "flops": st.flops, "bytes": st.bytes, "ir_bytes": L.lib.gopt_graph_memory(self._g, 0),
                "ops": {k: ops[k] for k in order}, "flops_by_op": {k: fb[k] for k in order}}

    def save(self, path):
        """Writes the model as ONNX (atomically)."""
        err = L.new_error()
        check(L.lib.gopt_onnx_save(self._g, L.s(path), ctypes.byref(err)), err)

    # ---- simulate --------------------------------------------------------------------------------
    def simulate(self, cluster_spec, decisions=None, costs=None, costdb=None, trace=None):
        """One simulated step, as `gopt simulate MODEL --cluster C --json`. decisions: None, a
        decisions file, a dict in the decisions format (docs/DECISIONS.md), or a list of those
        (later ones override keys of earlier ones). costs: analytical | measured | auto (default
        auto with a costdb, else analytical). trace: write a Chrome trace there."""
        c = cluster(cluster_spec)
        mode = _COSTS["auto" if costdb else "analytical"] if costs is None else _COSTS.get(costs)
        if mode is None:
            raise Error("costs: expected analytical, measured or auto, got '%s'" % costs, -1)
        if mode == 1 and not costdb:
            raise Error("costs measured needs a costdb", -1)
        err = L.new_error()
        db, sim, st = ctypes.c_void_p(), ctypes.c_void_p(), None
        d = L.Decisions()
        L.lib.gopt_decisions_init(ctypes.byref(d), self._g)
        try:
            if costdb:
                check(L.lib.gopt_costdb_load(L.s(costdb), ctypes.byref(db), ctypes.byref(err)), err)
            last = _load_decisions(self, d, decisions)
            so = L.SimOpts(mode, db, None, None)
            check(L.lib.gopt_sim_new(self._g, c._p, ctypes.byref(so), ctypes.byref(sim), ctypes.byref(err)), err)
            st = L.lib.gopt_sim_state_new(sim)
            if not st:
                raise Error("out of memory", -2)
            check(L.lib.gopt_sim_state_apply(st, ctypes.byref(d), ctypes.byref(err)), err, last)
            r = L.SimResult()
            check(L.lib.gopt_sim_evaluate(st, ctypes.byref(r), ctypes.byref(err)), err)
            if trace:
                check(L.lib.gopt_sim_write_trace(st, L.s(trace), ctypes.byref(err)), err)
            out = _sim_json(self, c, sim, st, r, mode)
            if trace:
                out["trace"] = os.fspath(trace)
            return out
        finally:
            L.lib.gopt_decisions_clear(ctypes.byref(d))
            L.lib.gopt_sim_state_free(st)
            L.lib.gopt_sim_free(sim)
            L.lib.gopt_costdb_free(db)

    # ---- optimize / compare --------------------------------------------------------------------
    def optimize(self, task, cluster_spec, method, budget=None, seconds=0.0, seed=0, threads=0,
                 start=None, policy=None, samples=16, finetune=0, out=None):
        """Runs one method (a baseline such as "metis" or "metis+mem_greedy", a search method such
        as "anneal", or "go", the learned policy), as `gopt optimize ... --json`: the dict has the
        CLI's keys (objective, default_objective, improvement_pct, step_time_s, peak_mem_bytes,
        feasible, evaluations, curve, ...) and "x", the decision vector (numpy). out: write the
        decisions file there."""
        with _TaskRun(self, task, cluster_spec, threads) as tr:
            return tr.optimize(method, budget, seconds, seed, start, policy, samples, finetune, out)

    def compare(self, task, cluster_spec, methods=None, budget=None, seconds=0.0, seed=0, threads=0,
                start=None, policy=None, samples=16, finetune=0):
        """Every applicable baseline of the task, every applicable search method and the learned
        policy when one is found (or the given methods), as `gopt compare ... --json`: keys
        results (one dict per method), best, skipped, default_objective, budget, ..."""
        with _TaskRun(self, task, cluster_spec, threads) as tr:
            return tr.compare(methods, budget, seconds, seed, start, policy, samples, finetune)


def load(model, batch=None, training=False, fold=True):
    """Loads a model: an .onnx path or a zoo spec ("resnet50", "gnmt:layers=8,steps=100"), binds
    the symbolic batch dimension to batch, infers shapes (folding shape subgraphs unless fold is
    False) and, with training=True, builds the training step. Raises gopt.Error."""
    return model if isinstance(model, Model) else Model(model, batch, training, fold)


def _load_decisions(model, d, decisions):
    """Reads decisions (None, path, dict or a list of them) into d; returns the last file's label."""
    if decisions is None:
        return None
    items = decisions if isinstance(decisions, (list, tuple)) else [decisions]
    err = L.new_error()
    label = None
    for item in items:
        if isinstance(item, dict):
            fd, path = tempfile.mkstemp(suffix=".json", prefix="gopt-decisions-")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(item, f)
                check(L.lib.gopt_decisions_load(ctypes.byref(d), model._g, L.s(path), ctypes.byref(err)), err)
            finally:
                os.unlink(path)
            label = "decisions"
        else:
            check(L.lib.gopt_decisions_load(ctypes.byref(d), model._g, L.s(item), ctypes.byref(err)), err)
            label = os.fspath(item)
    return label


def _sim_json(model, c, sim, st, r, mode):
    """The dict `gopt simulate --json` prints for one evaluation."""
    g = model._g
    cc = c._p.contents
    devs = [{"name": cc.devices[k].name.decode(), "model": cc.devices[k].model.decode(), "busy_s": r.busy[k],
             "utilization": r.busy[k] / r.step_time if r.step_time > 0 else 0.0, "peak_mem_bytes": r.peak_mem[k],
             "resident_bytes": r.resident[k], "capacity_bytes": cc.devices[k].mem_bytes,
             "over_bytes": r.mem_over[k]} for k in range(r.n_devices)]
    links = [{"name": cc.links[k].name.decode(), "bytes": r.link_bytes[k], "busy_s": r.link_busy[k]}
             for k in range(r.n_links)]
    n = L.lib.gopt_sim_critical_path(st, None, 0)
    items = (L.SimItem * max(n, 1))()
    L.lib.gopt_sim_critical_path(st, items, n)
    tensors = _view(model._graph().tensors, _TENSOR_DT)
    path = []
    for it in items[:n]:
        if it.kind == 0:
            e = {"kind": "kernel", "node": L.lib.gopt_node_name(g, it.id).decode(), "device": it.device}
        else:
            t = L.SimTransfer()
            L.lib.gopt_sim_transfer(st, it.id, ctypes.byref(t))
            e = {"kind": "transfer", "tensor": model._str(int(tensors["name"][t.tensor])), "link": t.link,
                 "bytes": t.bytes}
        e["start_s"], e["end_s"] = it.start, it.end
        path.append(e)
    kinds = []  # what priced the kernels, each kind once (cmd_simulate.c's kernel_model)
    for k in range(cc.n_devices):
        d = cc.devices[k]
        kind = "measured-GPU " + d.gpu_version.decode() if d.gpu_model else "roofline"
        if kind not in kinds:
            kinds.append(kind)
    return {"model": model.spec, "nodes": L.lib.gopt_sim_node_count(sim), "cluster": cc.name.decode(),
            "costs": {0: "analytical", 1: "measured", 2: "auto"}[mode], "kernel_model": ", ".join(kinds),
            "measured_nodes": L.lib.gopt_sim_measured_count(sim), "step_time_s": r.step_time,
            "feasible": bool(r.feasible), "kernels": r.n_kernels, "transfers": r.n_transfers,
            "transfer_bytes": r.transfer_bytes, "devices": devs, "links": links, "critical_path": path}


def result_dict(r):
    return {"objective": r.objective, "step_time_s": r.step_time, "peak_mem_bytes": r.peak_mem,
            "mem_over_bytes": r.mem_over, "feasible": bool(r.feasible)}


def method_kind(name):
    """"baseline", "search", "learned", "guided" (regal: a search sampling from a learned policy)
    or None (unknown)."""
    if name == "go":
        return "learned"
    if name == "regal":
        return "guided"
    if name in search_methods():
        return "search"
    return "baseline" if L.lib.gopt_baseline_known(L.s(name)) else None


def search_methods():
    return [L.lib.gopt_search_method_name(i).decode() for i in range(L.lib.gopt_search_method_count())]


def task_baselines(task):
    t = _task_id(task)
    return [L.lib.gopt_baseline_task_name(t, i).decode() for i in range(L.lib.gopt_baseline_task_count(t))]


def _task_id(task):
    t = L.lib.gopt_task_from_name(L.s(task))
    if t < 0:
        raise Error("task: unknown task '%s' (%s)" % (task, ", ".join(TASKS)), -1)
    return t


def find_policy(task, kind="go"):
    """The shipped policy file of a kind ("go": <task>.gpol, "regal": <task>_regal.gpol) for task
    ($GOPT_POLICY_DIR, the checkout's policies/, the install prefix's share/gopt/policies), or raises
    Error saying where it looked."""
    exe = os.path.join(os.path.dirname(os.path.realpath(L.LIB_PATH)), "bin", "gopt")
    err, buf = L.new_error(), ctypes.create_string_buffer(4096)
    check(L.lib.gopt_learn_find_policy_kind(_task_id(task), L.s(kind), L.s(exe), buf, 4096, ctypes.byref(err)), err)
    return buf.value.decode()


def policy_kind(path, task):
    """The kind ("go" or "regal") of the policy file path for task, or raises Error."""
    err, p = L.new_error(), ctypes.c_void_p()
    check(L.lib.gopt_policy_load(L.s(path), _task_id(task), ctypes.byref(p), ctypes.byref(err)), err)
    kind = L.lib.gopt_policy_kind(p).decode()
    L.lib.gopt_policy_free(p)
    return kind


class _TaskRun:
    """A task environment for optimize/compare, mirroring src/cli/cli_task.c: the default
    decisions' evaluation, the search start, one method's run and its fresh evaluation."""

    def __init__(self, model, task, cluster_spec, threads):
        self.model, self.task, self.cluster = load(model), task, cluster(cluster_spec)
        self.t = _task_id(task)
        self.env = ctypes.c_void_p()
        err = L.new_error()
        eo = L.EnvOpts(self.t, None, 0.0, int(threads))
        check(L.lib.gopt_env_new(self.model._g, self.cluster._p, ctypes.byref(eo), ctypes.byref(self.env),
                                 ctypes.byref(err)), err)
        self.nv = L.lib.gopt_env_nvars(self.env)
        self._threads = int(threads)

    def __enter__(self):
        L.lib.gopt_search_clear_stop()
        L.lib.gopt_learn_clear_stop()
        return self

    def __exit__(self, *a):
        L.lib.gopt_env_free(self.env)
        self.env = None

    def vec(self):
        return np.zeros(self.nv + 1, np.float64)

    def evaluate(self, x):
        err, r, rep = L.new_error(), L.EnvResult(), ctypes.c_size_t()
        w = L.lib.gopt_env_ws_new(self.env)
        if not w:
            raise Error("out of memory", -2)
        try:
            check(L.lib.gopt_env_evaluate(w, _dp(x), ctypes.byref(r), ctypes.byref(rep), ctypes.byref(err)), err)
        finally:
            L.lib.gopt_env_ws_free(w)
        return r, rep.value

    def default(self):
        x = self.vec()
        L.lib.gopt_env_default(self.env, _dp(x))
        return self.evaluate(x)[0]

    def applicable(self, method):
        kind = method_kind(method)
        why = ctypes.c_char_p()
        if kind == "learned":
            return (True, None) if self.nv > 0 else (False, "the task has no decision variables on this graph")
        if kind in ("search", "guided"):
            ok = L.lib.gopt_search_applicable(L.s("brkga-regal" if kind == "guided" else method), self.env,
                                              ctypes.byref(why))
        else:
            ok = L.lib.gopt_baseline_applicable(L.s(method), self.env, ctypes.byref(why))
        return bool(ok), (why.value.decode() if why.value else "not applicable")

    def start(self, spec):
        err, info, x0 = L.new_error(), L.StartInfo(), self.vec()
        check(L.lib.gopt_search_start(self.env, L.s(spec or "best"), _dp(x0), ctypes.byref(info),
                                      ctypes.byref(err)), err, "start")
        return x0, info

    def run(self, method, budget, seconds, seed, start, policy, samples, finetune):
        """Runs method; returns (x, dict of the CLI's per-method keys)."""
        kind = method_kind(method)
        ev0 = L.lib.gopt_env_evaluations(self.env)
        x = self.vec()
        err = L.new_error()
        curve, offset = [], (start[1].evals if kind in ("search", "guided") else 0)
        cb = L.TRACE_FN(lambda ev, sec, best, user: curve.append([int(ev) + offset, best]))
        res = L.SearchResult()
        extra = {}
        t0 = time.monotonic()
        if kind == "learned":
            path = policy or find_policy(self.task)
            p = ctypes.c_void_p()
            check(L.lib.gopt_policy_load(L.s(path), self.t, ctypes.byref(p), ctypes.byref(err)), err)
            try:
                lo = L.LearnOptOpts(int(samples), int(finetune), int(seed), cb, None)
                check(L.lib.gopt_learn_optimize(p, self.env, ctypes.byref(lo), _dp(x), ctypes.byref(res),
                                                ctypes.byref(err)), err, method)
            finally:
                L.lib.gopt_policy_free(p)
            evals = res.evals
            extra = {"policy": path, "finetune_evaluations": int(finetune)}
        elif kind in ("search", "guided"):
            x0, info = start
            so = L.SearchOpts()
            so.budget_evals = L.lib.gopt_search_budget_after_start(_budget(budget, seconds), ctypes.byref(info))
            so.budget_seconds, so.seed, so.threads, so.x0, so.on_improve = float(seconds), int(seed), \
                int(self._threads), _dp(x0), cb
            extra = {"start": info.name.decode(), "start_evaluations": info.evals}
            p, smp = ctypes.c_void_p(), ctypes.c_void_p()
            try:
                if kind == "guided":  # regal: brkga-regal sampling from the policy (cli_task.c's run_search)
                    path = policy or find_policy(self.task, "regal")
                    check(L.lib.gopt_policy_load(L.s(path), self.t, ctypes.byref(p), ctypes.byref(err)), err)
                    check(L.lib.gopt_regal_sampler_new(p, self.env, ctypes.byref(smp), ctypes.byref(err)), err, path)
                    L.lib.gopt_regal_sampler_attach(smp, ctypes.byref(so))
                    extra["policy"] = path
                check(L.lib.gopt_search_run(L.s("brkga-regal" if kind == "guided" else method), self.env,
                                            ctypes.byref(so), _dp(x), ctypes.byref(res), ctypes.byref(err)), err, method)
            finally:
                L.lib.gopt_regal_sampler_free(smp)
                L.lib.gopt_policy_free(p)
            evals = res.evals + info.evals
        else:
            check(L.lib.gopt_baseline_run(L.s(method), self.env, _dp(x), ctypes.byref(err)), err, method)
        r, repaired = self.evaluate(x)
        if kind == "baseline":
            evals = L.lib.gopt_env_evaluations(self.env) - ev0
        d = result_dict(r)
        d.update({"method": method, "kind": "learned" if kind == "guided" else kind, "evaluations": int(evals), "seconds": time.monotonic() - t0,
                  "repaired": repaired, "interrupted": bool(res.interrupted), "optimal": bool(res.optimal)})
        if kind != "baseline":
            d["curve"] = curve
        d.update(extra)
        return x[:self.nv].copy(), d, r

    def optimize(self, method, budget, seconds, seed, start, policy, samples, finetune, out):
        kind = method_kind(method)
        if kind is None:
            raise Error("method: unknown method '%s' (%s)" % (method, ", ".join(
                task_baselines(self.task) + search_methods() + ["go", "regal"])), -1)
        ok, why = self.applicable(method)
        if not ok:
            raise Error("method '%s' does not apply to the %s task: %s" % (method, self.task, why), -1)
        rd = self.default()
        st = self.start(start) if kind in ("search", "guided") else None
        x, d, r = self.run(method, budget, seconds, seed, st, policy, samples, finetune)
        if out:
            save_decisions(self.model, self.env, x, out)
            d["decisions"] = os.fspath(out)
        head = {"model": self.model.spec, "nodes": self.model.node_count, "task": self.task,
                "cluster": self.cluster.name}
        head.update(d)
        head.update({"objective_unit": "bytes" if self.task == "memory" else "seconds",
                     "default_objective": rd.objective, "seed": int(seed),
                     "improvement_pct": _impr(rd.objective, r.objective), "x": x})
        return head

    def compare(self, methods, budget, seconds, seed, start, policy, samples, finetune):
        skipped = []
        if methods:
            rows = list(methods.split(",") if isinstance(methods, str) else methods)
            for m in rows:
                if method_kind(m) is None:
                    raise Error("methods: unknown method '%s'" % m, -1)
        else:
            rows = task_baselines(self.task) + search_methods()
            if self.task in ("fusion", "placement"):  # guided needs the CLI's local advantage model
                rows.remove("guided")
                skipped.append("guided (the Python binding does not run the guided search; use gopt compare)")
            given, gerr = None, None  # --policy: its kind's row only (neither when it is no such policy)
            if policy:
                try:
                    given = policy_kind(policy, self.task)
                except Error as e:
                    given, gerr = "", str(e)
            for kind in ("go", "regal"):
                if given is not None and given != kind:
                    if given == "":
                        skipped.append("%s (--policy: %s)" % (kind, gerr[:270]))
                    continue
                try:
                    if not policy:
                        find_policy(self.task, kind)
                    rows.append(kind)
                except Error as e:
                    skipped.append("%s (%s)" % (kind, str(e)[:280]))
        kept = []
        for m in rows:
            ok, why = self.applicable(m)
            if ok:
                kept.append(m)
            elif methods:
                raise Error("method '%s' does not apply to the %s task: %s" % (m, self.task, why), -1)
            else:
                skipped.append("%s (%s)" % (m, why))
        rd = self.default()
        st = self.start(start) if any(method_kind(m) in ("search", "guided") for m in kept) else None
        results, best = [], None
        for m in kept:
            try:
                x, d, r = self.run(m, budget, seconds, seed, st, policy, samples, finetune)
            except Error as e:
                skipped.append("%s (failed: %s)" % (m, str(e)[:150]))
                continue
            d["improvement_pct"] = _impr(rd.objective, r.objective)
            d["x"] = x
            for k in ("repaired", "mem_over_bytes", "policy", "finetune_evaluations"):
                d.pop(k, None)  # compare's rows have the CLI's keys
            results.append(d)
            if best is None or L.lib.gopt_env_result_cmp(ctypes.byref(r), ctypes.byref(best[1])) < 0:
                best = (m, r)
        return {"model": self.model.spec, "nodes": self.model.node_count, "task": self.task,
                "cluster": self.cluster.name, "budget": _budget(budget, seconds), "seed": int(seed),
                "objective_unit": "bytes" if self.task == "memory" else "seconds",
                "default_objective": rd.objective, "results": results, "best": best[0] if best else None,
                "skipped": skipped}


def save_decisions(model, env, x, path):
    """Writes decision vector x of env as a decisions file (docs/DECISIONS.md)."""
    err, d = L.new_error(), L.Decisions()
    L.lib.gopt_decisions_init(ctypes.byref(d), model._g)
    try:
        xx = np.ascontiguousarray(x, np.float64)
        check(L.lib.gopt_env_to_decisions(env, _dp(xx), ctypes.byref(d), ctypes.byref(err)), err)
        check(L.lib.gopt_decisions_save(ctypes.byref(d), model._g, L.s(path), ctypes.byref(err)), err)
    finally:
        L.lib.gopt_decisions_clear(ctypes.byref(d))


def _budget(budget, seconds):
    if budget is not None:
        if int(budget) < 1:
            raise Error("budget: expected an integer >= 1, got %r" % (budget,), -1)
        return int(budget)
    return 0 if seconds and seconds > 0 else 1000


def _impr(default, obj):
    return 100.0 * (default - obj) / default if default > 0 else 0.0


def _dp(x):
    return x.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


class _Knob(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dflt", ctypes.c_int64), ("min", ctypes.c_int64),
                ("max", ctypes.c_int64), ("description", ctypes.c_char_p)]


class _ZooModel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("description", ctypes.c_char_p), ("n_knobs", ctypes.c_size_t),
                ("knobs", ctypes.POINTER(_Knob))]


L.lib.gopt_zoo_count.restype, L.lib.gopt_zoo_count.argtypes = ctypes.c_size_t, []
L.lib.gopt_zoo_get.restype, L.lib.gopt_zoo_get.argtypes = ctypes.POINTER(_ZooModel), [ctypes.c_size_t]
L.lib.gopt_zoo_node_count.restype = ctypes.c_int
L.lib.gopt_zoo_node_count.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(L._Error)]


def zoo():
    """The built-in models, as `gopt zoo` lists them: [{"name", "description", "knobs": [{"name",
    "default", "min", "max", "description"}]}]."""
    out = []
    for i in range(L.lib.gopt_zoo_count()):
        m = L.lib.gopt_zoo_get(i).contents
        knobs = [{"name": k.name.decode(), "default": k.dflt, "min": k.min, "max": k.max,
                  "description": k.description.decode()} for k in m.knobs[:m.n_knobs]]
        out.append({"name": m.name.decode(), "description": m.description.decode(), "knobs": knobs})
    return out


def zoo_node_count(spec):
    """The exact node count of a zoo spec, without building it (fast for huge settings)."""
    err, n = L.new_error(), ctypes.c_size_t()
    check(L.lib.gopt_zoo_node_count(L.s(spec), ctypes.byref(n), ctypes.byref(err)), err)
    return n.value
