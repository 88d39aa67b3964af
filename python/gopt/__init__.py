"""gopt: the Python binding of libgopt (ctypes + numpy, no compiled extension).

    import gopt
    m = gopt.load("resnet50")                  # or an .onnx path
    m.info()                                    # dict, as `gopt info --json`
    m.simulate("2xV100")                        # dict, as `gopt simulate --json`
    m.optimize("placement", "2xV100", "anneal", budget=500, seed=1)
    m.compare("placement", "2xV100", budget=300)
    env = gopt.Env("resnet50", "placement", "2xV100", mode="graph", seed=0)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

docs/PYTHON.md is the reference. Errors raise gopt.Error carrying gopt's one-line message."""
from ._lib import LIB_PATH, VERSION, Error
from .env import Env
from .model import (TASKS, Cluster, Model, find_policy, load, method_kind, search_methods, task_baselines,
                    zoo, zoo_node_count)
from . import _lib, spaces

__version__ = VERSION
__all__ = ["Env", "Error", "Model", "Cluster", "load", "library_path", "spaces", "TASKS", "find_policy",
           "method_kind", "search_methods", "task_baselines", "zoo", "zoo_node_count", "request_stop", "__version__"]


def request_stop():
    """Asks running searches and learned-policy runs to stop and return their best so far (what
    Ctrl-C does in the CLI). ctypes releases the GIL during library calls, so another thread (a
    timer, a signal-watching thread) can call this while optimize()/compare() runs; the next
    optimize()/compare() clears the request when it starts."""
    _lib.lib.gopt_search_request_stop()
    _lib.lib.gopt_learn_request_stop()


def library_path():
    """The path of the libgopt.so this binding loaded."""
    return LIB_PATH
