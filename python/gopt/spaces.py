"""spaces.py: action and observation spaces in the Gymnasium style, as plain objects (no gymnasium
dependency): Discrete(n), MultiDiscrete(nvec), Box(low, high, shape, dtype) and Dict(spaces), each
with .shape, .dtype, .sample(), .contains(x) and .seed(seed); .n for Discrete, .nvec for
MultiDiscrete. Sampling uses the space's own numpy Generator, so a seed reproduces it."""
import numpy as np


class Space:
    def __init__(self, shape, dtype, seed=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.np_random = np.random.default_rng(seed)

    def seed(self, seed=None):
        """Reseeds sample() (numpy's default_rng(seed))."""
        self.np_random = np.random.default_rng(seed)
        return [seed]

    def __contains__(self, x):
        return self.contains(x)


class Discrete(Space):
    """Integers 0 .. n-1."""

    def __init__(self, n, seed=None):
        super().__init__((), np.int64, seed)
        self.n = int(n)

    def sample(self):
        return int(self.np_random.integers(self.n))

    def contains(self, x):
        try:
            v = int(x)
        except (TypeError, ValueError):
            return False
        return v == x and 0 <= v < self.n

    def __repr__(self):
        return "Discrete(%d)" % self.n


class MultiDiscrete(Space):
    """A vector of integers, element i in 0 .. nvec[i]-1."""

    def __init__(self, nvec, seed=None):
        self.nvec = np.asarray(nvec, np.int64)
        super().__init__(self.nvec.shape, np.int64, seed)

    def sample(self):
        return (self.np_random.random(self.nvec.shape) * self.nvec).astype(np.int64)

    def contains(self, x):
        a = np.asarray(x)
        return a.shape == self.shape and np.issubdtype(a.dtype, np.integer) and bool(
            np.all((a >= 0) & (a < self.nvec)))

    def __repr__(self):
        return "MultiDiscrete(%s)" % (self.nvec if self.nvec.size <= 8 else "shape=%s" % (self.shape,))


class Box(Space):
    """Arrays of shape with low <= x <= high elementwise. integer (a bool mask of the shape, or
    None) marks elements that take only integer values (sample() rounds them down)."""

    def __init__(self, low, high, shape=None, dtype=np.float64, integer=None, seed=None):
        if shape is None:
            shape = np.broadcast(np.asarray(low), np.asarray(high)).shape
        super().__init__(shape, dtype, seed)
        self.low = np.broadcast_to(np.asarray(low, self.dtype), self.shape)
        self.high = np.broadcast_to(np.asarray(high, self.dtype), self.shape)
        self.integer = None if integer is None else np.broadcast_to(np.asarray(integer, bool), self.shape)

    def sample(self):
        lo, hi = self.low.astype(np.float64), self.high.astype(np.float64)
        fin = np.isfinite(lo) & np.isfinite(hi)
        u = np.where(fin, lo + self.np_random.random(self.shape) * np.where(fin, hi - lo, 0),
                     self.np_random.standard_normal(self.shape))
        if self.integer is not None:
            u = np.where(self.integer, np.minimum(np.floor(u), hi), u)
        return u.astype(self.dtype)

    def contains(self, x):
        a = np.asarray(x)
        if a.shape != self.shape:
            return False
        ok = bool(np.all((a >= self.low) & (a <= self.high)))
        if ok and self.integer is not None:
            ok = bool(np.all(np.where(self.integer, np.floor(a) == a, True)))
        return ok

    def __repr__(self):
        return "Box(shape=%s, dtype=%s)" % (self.shape, self.dtype)


class Dict(Space):
    """A dict of named spaces; sample() and contains() work key by key."""

    def __init__(self, spaces, seed=None):
        super().__init__((), object, seed)
        self.spaces = dict(spaces)
        self.seed(seed)

    def seed(self, seed=None):
        ss = np.random.SeedSequence(seed)
        for sp, child in zip(self.spaces.values(), ss.spawn(len(self.spaces))):
            sp.seed(int(child.generate_state(1)[0]))
        return [seed]

    def __getitem__(self, k):
        return self.spaces[k]

    def keys(self):
        return self.spaces.keys()

    def sample(self):
        return {k: sp.sample() for k, sp in self.spaces.items()}

    def contains(self, x):
        return isinstance(x, dict) and x.keys() == self.spaces.keys() and all(
            sp.contains(x[k]) for k, sp in self.spaces.items())

    def __repr__(self):
        return "Dict(%s)" % ", ".join("%s: %r" % kv for kv in self.spaces.items())
