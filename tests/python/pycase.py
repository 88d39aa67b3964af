"""pycase.py: the case runner the Python binding's tests share: @case(name) runs the function at
once, prints ok/FAIL, and records failing names in `failures` (the script exits non-zero on any)."""

failures = []


def case(name):
    def wrap(fn):
        try:
            fn()
            print("ok   %s" % name)
        except Exception as e:  # noqa: BLE001 - report every failing case
            failures.append(name)
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        return fn
    return wrap
