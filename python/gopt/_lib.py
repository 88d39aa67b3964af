"""_lib.py: finds and loads libgopt.so and declares, with ctypes, the C structs and functions of
gopt's public API (include/gopt/*.h) that the binding uses; gopt.Error and the error check.

The library is found, in order: $GOPT_LIB (a path to libgopt.so); the build tree of the checkout
this package sits in (build/libgopt.so next to python/); the install prefix this package was
installed under (_install.py, written by `cmake --install`); the system's (ctypes.util)."""
import ctypes
import ctypes.util
import os

c_int, c_int32, c_uint32, c_uint16, c_uint8 = ctypes.c_int, ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint16, ctypes.c_uint8
c_int64, c_uint64, c_size_t, c_double, c_float = ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_double, ctypes.c_float
c_char_p, c_void_p, POINTER = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER

GOPT_DT_COUNT = 27  # include/gopt/graph.h: ONNX dtypes 0..26 (the 8-, 4- and 2-bit types included)
GOPT_SIM_NCLASS = 7
GOPT_GPU_NCOEF = 16 * 5  # gopt/gpu_cost.h: GOPT_GK_COUNT (16) kinds x GOPT_GF_PER_KIND (5) features
GOPT_ENV_NFEAT = 24


class Error(Exception):
    """A gopt call failed. str(e) is gopt's one-line message; e.code the negative GOPT_E* code
    (0 for errors the binding finds itself, e.g. a bad argument), e.code_name its name."""

    def __init__(self, message, code=-1):
        super().__init__(message)
        self.code = code
        self.code_name = _code_name(code)


class _Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("msg", ctypes.c_char * 512)]


def _find_library():
    """The path of the libgopt.so to load (see the module docstring), or raises Error."""
    tried = []
    env = os.environ.get("GOPT_LIB")
    if env:
        if os.path.isfile(env):
            return os.path.abspath(env)
        raise Error("GOPT_LIB=%s: no such file" % env, -3)
    here = os.path.dirname(os.path.abspath(__file__))
    cand = [os.path.join(here, "..", "..", "build", "libgopt.so")]
    try:
        from . import _install  # written at install time: libdir relative to this package
        cand.append(os.path.join(here, _install.LIBDIR_REL, "libgopt.so.%s" % _install.SOVERSION))
    except ImportError:
        pass
    for c in cand:
        tried.append(os.path.normpath(c))
        if os.path.isfile(c):
            return os.path.realpath(c)
    sysl = ctypes.util.find_library("gopt")
    if sysl:
        return sysl
    raise Error("libgopt.so not found: set GOPT_LIB, or build the checkout (looked at %s and the "
                "system library path)" % ", ".join(tried), -3)


LIB_PATH = _find_library()
lib = ctypes.CDLL(LIB_PATH)


def _code_name(code):
    try:
        return lib.gopt_error_name(code).decode()
    except Exception:  # noqa: BLE001 - only while the library itself is missing
        return str(code)


def check(rc, err, what=None):
    """Raises Error with err's message when rc is non-zero (a negative GOPT_E* code)."""
    if rc != 0:
        msg = err.msg.decode("utf-8", "replace") or _code_name(rc)
        raise Error("%s: %s" % (what, msg) if what else msg, rc)
    return rc


def new_error():
    return _Error()


# ---- structs (layouts as in include/gopt/*.h) ---------------------------------------------------
class Array(ctypes.Structure):  # GOPT_ARRAY(T)
    _fields_ = [("a", c_void_p), ("n", c_size_t), ("cap", c_size_t)]


class Graph(ctypes.Structure):  # the leading fields of gopt_graph the binding reads
    _fields_ = [("name", c_uint32), ("strs", c_void_p), ("nodes", Array), ("tensors", Array),
                ("slots", Array), ("outs", Array)]


class GraphStats(ctypes.Structure):
    _fields_ = [("nodes", c_size_t), ("edges", c_size_t), ("tensors", c_size_t), ("params", c_int64),
                ("trainable", c_int64), ("param_bytes", c_int64), ("flops", c_double), ("bytes", c_double)]


class Cost(ctypes.Structure):
    _fields_ = [("flops", c_double), ("bytes_read", c_double), ("bytes_written", c_double), ("params", c_int64)]


class InferOpts(ctypes.Structure):
    _fields_ = [("fold_constants", c_int), ("keep_source_shapes", c_int)]


class Device(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 32), ("model", ctypes.c_char * 32), ("kind", ctypes.c_char * 8),
                ("peak_flops", c_double * GOPT_DT_COUNT), ("mem_bw", c_double), ("mem_bytes", c_double),
                ("launch_s", c_double), ("eff", c_double * GOPT_SIM_NCLASS), ("measured", c_int),
                ("eff_mem", c_double * GOPT_SIM_NCLASS), ("eff_slope", c_double * GOPT_SIM_NCLASS),
                ("op_s", c_double * GOPT_SIM_NCLASS), ("serial", c_double), ("cache_bytes", c_double * 2),
                ("cache_bw", c_double * 2), ("gpu_model", c_int), ("gpu_coef", c_double * GOPT_GPU_NCOEF),
                ("gpu_version", ctypes.c_char * 24), ("gpu_half_speedup", c_double)]


class Link(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 48), ("bw", c_double), ("latency_s", c_double)]


class Cluster(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 64), ("n_devices", c_int), ("n_links", c_int),
                ("devices", POINTER(Device)), ("links", POINTER(Link)), ("route", POINTER(c_int))]


class SimOpts(ctypes.Structure):
    _fields_ = [("costs", c_int), ("costdb", c_void_p), ("cost_fn", c_void_p), ("cost_user", c_void_p)]


class SimResult(ctypes.Structure):
    _fields_ = [("step_time", c_double), ("feasible", c_int), ("n_devices", c_int), ("n_links", c_int),
                ("n_kernels", c_size_t), ("n_transfers", c_size_t), ("transfer_bytes", c_double)] + \
               [(k, POINTER(c_double)) for k in ("busy", "peak_mem", "mem_over", "resident", "end_mem",
                                                  "link_bytes", "link_busy")]


class SimItem(ctypes.Structure):
    _fields_ = [("kind", c_int), ("id", c_int32), ("device", c_int), ("start", c_double), ("end", c_double)]


class SimTransfer(ctypes.Structure):
    _fields_ = [("tensor", c_int32), ("src", c_int), ("dst", c_int), ("link", c_int), ("bytes", c_double),
                ("start", c_double), ("end", c_double)]


class Decisions(ctypes.Structure):
    _fields_ = [("n_nodes", c_size_t), ("placement", POINTER(c_int32)), ("group", POINTER(c_int32)),
                ("n_groups", c_int32), ("priority", POINTER(c_double)), ("order", POINTER(c_int32)),
                ("n_order", c_size_t)]


class EnvVar(ctypes.Structure):
    _fields_ = [("node", c_int32), ("kind", c_int32), ("card", c_int32)]


class EnvResult(ctypes.Structure):
    _fields_ = [("objective", c_double), ("step_time", c_double), ("peak_mem", c_double),
                ("mem_over", c_double), ("feasible", c_int)]


class EnvOpts(ctypes.Structure):
    _fields_ = [("task", c_int), ("sim", POINTER(SimOpts)), ("mem_penalty", c_double), ("threads", c_int)]


TRACE_FN = ctypes.CFUNCTYPE(None, c_uint64, c_double, c_double, c_void_p)


class SearchOpts(ctypes.Structure):
    _fields_ = [("budget_evals", c_uint64), ("budget_seconds", c_double), ("seed", c_uint64), ("threads", c_int),
                ("progress", c_int), ("x0", POINTER(c_double)), ("temperature", c_double), ("population", c_int),
                ("elite_frac", c_double), ("mutant_frac", c_double), ("elite_bias", c_double),
                ("alpha", c_double), ("hops", c_int), ("guide", c_void_p), ("guide_user", c_void_p),
                ("on_improve", TRACE_FN), ("on_sample", c_void_p), ("user", c_void_p),
                ("sample_keys", c_void_p), ("keys_user", c_void_p),
                ("dist", c_void_p)]  # const gopt_learn_dist * (MPI runs only; NULL here)


class SearchResult(ctypes.Structure):
    _fields_ = [("best", EnvResult), ("evals", c_uint64), ("seconds", c_double), ("interrupted", c_int),
                ("optimal", c_int)]


class StartInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 128), ("evals", c_uint64), ("evaluated", c_int), ("result", EnvResult)]


class LearnOptOpts(ctypes.Structure):
    _fields_ = [("samples", c_int), ("finetune_evals", c_uint64), ("seed", c_uint64), ("on_improve", TRACE_FN),
                ("user", c_void_p), ("raw", c_int)]


# ---- functions --------------------------------------------------------------------------------
E = POINTER(_Error)
P = c_void_p
DP = POINTER(c_double)
_SIGS = {
    "gopt_version": (c_char_p, []),
    "gopt_error_name": (c_char_p, [c_int]),
    # models
    "gopt_onnx_load": (c_int, [c_char_p, P, POINTER(P), E]),
    "gopt_hlo_load": (c_int, [c_char_p, POINTER(P), E]),
    "gopt_hlo_is_hlo_file": (c_int, [c_char_p]),
    "gopt_hlo_instruction_count": (c_size_t, [P]),
    "gopt_onnx_save": (c_int, [P, c_char_p, E]),
    "gopt_zoo_build": (c_int, [c_char_p, POINTER(P), E]),
    "gopt_infer_shapes": (c_int, [P, POINTER(InferOpts), E]),
    "gopt_graph_batch_symbol": (c_char_p, [P]),
    "gopt_graph_bind_symbol": (c_size_t, [P, c_char_p, c_int64]),
    "gopt_train_build": (c_int, [P, P, E]),
    "gopt_graph_free": (None, [P]),
    "gopt_graph_str": (c_char_p, [P, c_uint32]),
    "gopt_graph_node_count": (c_size_t, [P]),
    "gopt_graph_edge_count": (c_size_t, [P]),
    "gopt_graph_memory": (c_size_t, [P, c_int]),
    "gopt_graph_hash": (c_uint64, [P]),
    "gopt_graph_stats_compute": (None, [P, POINTER(GraphStats)]),
    "gopt_node_type": (c_char_p, [P, c_int32]),
    "gopt_node_name": (c_char_p, [P, c_int32]),
    "gopt_node_cost": (None, [P, c_int32, POINTER(Cost)]),
    # clusters and the simulator
    "gopt_cluster_parse": (c_int, [c_char_p, POINTER(POINTER(Cluster)), E]),
    "gopt_cluster_free": (None, [POINTER(Cluster)]),
    "gopt_costdb_load": (c_int, [c_char_p, POINTER(P), E]),
    "gopt_costdb_free": (None, [P]),
    "gopt_sim_new": (c_int, [P, POINTER(Cluster), POINTER(SimOpts), POINTER(P), E]),
    "gopt_sim_free": (None, [P]),
    "gopt_sim_node_count": (c_size_t, [P]),
    "gopt_sim_measured_count": (c_size_t, [P]),
    "gopt_sim_state_new": (P, [P]),
    "gopt_sim_state_free": (None, [P]),
    "gopt_sim_state_apply": (c_int, [P, POINTER(Decisions), E]),
    "gopt_sim_evaluate": (c_int, [P, POINTER(SimResult), E]),
    "gopt_sim_write_trace": (c_int, [P, c_char_p, E]),
    "gopt_sim_critical_path": (c_size_t, [P, POINTER(SimItem), c_size_t]),
    "gopt_sim_transfer": (None, [P, c_size_t, POINTER(SimTransfer)]),
    "gopt_decisions_init": (None, [POINTER(Decisions), P]),
    "gopt_decisions_clear": (None, [POINTER(Decisions)]),
    "gopt_decisions_load": (c_int, [POINTER(Decisions), P, c_char_p, E]),
    "gopt_decisions_save": (c_int, [POINTER(Decisions), P, c_char_p, E]),
    # task environments
    "gopt_task_from_name": (c_int, [c_char_p]),
    "gopt_task_name": (c_char_p, [c_int]),
    "gopt_env_new": (c_int, [P, POINTER(Cluster), POINTER(EnvOpts), POINTER(P), E]),
    "gopt_env_free": (None, [P]),
    "gopt_env_nvars": (c_size_t, [P]),
    "gopt_env_vars": (POINTER(EnvVar), [P]),
    "gopt_env_default": (None, [P, DP]),
    "gopt_env_ws_new": (P, [P]),
    "gopt_env_ws_free": (None, [P]),
    "gopt_env_evaluate": (c_int, [P, DP, POINTER(EnvResult), POINTER(c_size_t), E]),
    "gopt_env_evaluate_delta": (c_int, [P, DP, POINTER(c_size_t), c_size_t, POINTER(EnvResult), E]),
    "gopt_env_evaluate_batch": (c_int, [P, DP, c_size_t, POINTER(EnvResult), E]),
    "gopt_env_evaluations": (c_uint64, [P]),
    "gopt_env_result_cmp": (c_int, [POINTER(EnvResult), POINTER(EnvResult)]),
    "gopt_env_to_decisions": (c_int, [P, DP, POINTER(Decisions), E]),
    "gopt_env_from_decisions": (c_int, [P, POINTER(Decisions), DP, E]),
    "gopt_env_node_features": (c_int, [P, POINTER(c_float), E]),
    # methods
    "gopt_baseline_known": (c_int, [c_char_p]),
    "gopt_baseline_applicable": (c_int, [c_char_p, P, POINTER(c_char_p)]),
    "gopt_baseline_run": (c_int, [c_char_p, P, DP, E]),
    "gopt_baseline_task_count": (c_size_t, [c_int]),
    "gopt_baseline_task_name": (c_char_p, [c_int, c_size_t]),
    "gopt_search_method_count": (c_size_t, []),
    "gopt_search_method_name": (c_char_p, [c_size_t]),
    "gopt_search_applicable": (c_int, [c_char_p, P, POINTER(c_char_p)]),
    "gopt_search_run": (c_int, [c_char_p, P, POINTER(SearchOpts), DP, POINTER(SearchResult), E]),
    "gopt_search_start": (c_int, [P, c_char_p, DP, POINTER(StartInfo), E]),
    "gopt_search_budget_after_start": (c_uint64, [c_uint64, POINTER(StartInfo)]),
    "gopt_learn_find_policy": (c_int, [c_int, c_char_p, ctypes.c_char_p, c_size_t, E]),
    "gopt_policy_load": (c_int, [c_char_p, c_int, POINTER(P), E]),
    "gopt_policy_free": (None, [P]),
    "gopt_policy_kind": (c_char_p, [P]),
    "gopt_learn_find_policy_kind": (c_int, [c_int, c_char_p, c_char_p, ctypes.c_char_p, c_size_t, E]),
    "gopt_regal_sampler_new": (c_int, [P, P, POINTER(P), E]),
    "gopt_regal_sampler_free": (None, [P]),
    "gopt_regal_sampler_attach": (None, [P, POINTER(SearchOpts)]),
    "gopt_learn_optimize": (c_int, [P, P, POINTER(LearnOptOpts), DP, POINTER(SearchResult), E]),
    "gopt_learn_reference": (c_int, [P, POINTER(EnvResult), DP, E]),
    "gopt_learn_reward": (c_double, [P, POINTER(EnvResult), POINTER(EnvResult)]),
    "gopt_search_request_stop": (None, []),
    "gopt_search_clear_stop": (None, []),
    "gopt_learn_request_stop": (None, []),
    "gopt_learn_clear_stop": (None, []),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

VERSION = lib.gopt_version().decode()


def s(v):
    """str -> bytes for a char * argument (None stays NULL)."""
    return None if v is None else os.fsencode(v) if not isinstance(v, bytes) else v
