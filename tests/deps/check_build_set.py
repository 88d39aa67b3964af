"""check_build_set.py BUILD_DIR: every file the CMake configuration found (libraries, headers,
programs, pkg-config modules, onnx.proto, the compiler) belongs to a Debian package of the `build`
dependency set of tools/install-deps.sh or to one of their (recursive) dependencies, so that
`./gopt`, which installs only that set, can always configure and build. Optional finders (MPI:
GOPT_MPI is on when it is found) may also resolve to the `test` set, which installs them.

The finders are read from CMakeLists.txt (find_path / find_library / find_program / find_file and
pkg_check_modules) and resolved through the build tree's CMakeCache.txt; a finder that the cache
does not resolve fails the check, so a new dependency cannot slip past it."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(msg):
    print("check_build_set: " + msg, file=sys.stderr)
    sys.exit(1)


def cache_entries(build):
    path = os.path.join(build, "CMakeCache.txt")
    if not os.path.exists(path):
        fail(f"{path}: no CMake cache (configure the build first)")
    out = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^([A-Za-z0-9_\-]+):(FILEPATH|PATH|STRING)=(.*)$", line.rstrip("\n"))
        if m:
            out[m.group(1)] = m.group(3)
    return out


def finder_files(cache):
    """(what, path) for every dependency CMakeLists.txt looks for."""
    text = open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8").read()
    text += open(os.path.join(ROOT, "cmake", "packaging.cmake"), encoding="utf-8").read()
    found = []
    for kind, var, names in re.findall(
            r"(find_path|find_library|find_program|find_file)\(\s*(\w+)\s+NAMES\s+([^\s)]+)", text):
        val = cache.get(var)
        if not val or val.endswith("-NOTFOUND"):
            fail(f"CMakeLists.txt: {kind}({var}) is not resolved in the cache")
        path = os.path.join(val, names) if kind == "find_path" else val
        found.append((f"{kind}({var})", path))
    for prefix, module in re.findall(r"pkg_check_modules\(\s*(\w+)\s+REQUIRED\s+(?:IMPORTED_TARGET\s+)?([\w\-]+)",
                                     text):
        libs = [v for k, v in cache.items() if k.startswith(f"pkgcfg_lib_{prefix}_")]
        if not libs:
            fail(f"CMakeLists.txt: pkg_check_modules({prefix} {module}) is not resolved in the cache")
        found += [(f"pkg_check_modules({prefix}) library", l) for l in libs]
        pc = subprocess.run(["pkg-config", "--variable=pcfiledir", module], capture_output=True,
                            text=True).stdout.strip()
        found.append((f"pkg_check_modules({prefix}) .pc", os.path.join(pc, module + ".pc")))
    if "find_package(MPI" in text and cache.get("MPI_C_LIB_NAMES"):
        # optional (GOPT_MPI is on when MPI is found): the `test` set installs it, so its
        # library and header may come from the build or the test set
        for name in cache["MPI_C_LIB_NAMES"].split(";"):
            found.append((f"find_package(MPI) {name}", cache.get(f"MPI_{name}_LIBRARY", ""), True))
        found.append(("find_package(MPI) mpi.h", os.path.join(cache.get("MPI_C_HEADER_DIR", ""), "mpi.h"),
                      True))
    if "find_package(OpenMP" in text:
        found.append(("find_package(OpenMP)", cache.get("OpenMP_gomp_LIBRARY", "")))
    for var in ("CMAKE_C_COMPILER", "CMAKE_MAKE_PROGRAM", "PKG_CONFIG_EXECUTABLE"):
        found.append((var, cache.get(var, "")))
    found.append(("cmake", "/usr/bin/cmake"))
    return found


def owner(path):
    real = os.path.realpath(path)
    for p in (real, path):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].split(",")[0].strip()
    return None


def closure(pkgs):
    """The installed packages pkgs depend on, recursively (Depends and Pre-Depends; every
    installed alternative of an 'a | b')."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}\n", p],
                           capture_output=True, text=True)
        if r.returncode != 0:
            continue
        for dep in re.split(r"[,|]", r.stdout):
            name = dep.strip().split(" ")[0].split(":")[0]
            if name and name not in seen:
                todo.append(name)
    return seen


def main():
    if len(sys.argv) != 2:
        fail("usage: check_build_set.py BUILD_DIR")
    cache = cache_entries(sys.argv[1])
    script = os.path.join(ROOT, "tools", "install-deps.sh")
    build = subprocess.run([script, "--print", "build"], capture_output=True, text=True,
                           check=True).stdout.split()
    test = subprocess.run([script, "--print", "test"], capture_output=True, text=True,
                          check=True).stdout.split()
    allowed = closure(build)
    allowed_optional = closure(build + [p for p in test if not p.startswith("npm:")])
    # the check must be able to fail: the test set's own packages are not build dependencies
    leaks = [p for p in test if p in allowed and p not in build]
    if "python3-torch" in leaks or "clang" in leaks:
        fail(f"the build set's closure contains test packages ({', '.join(leaks)})")
    files = finder_files(cache)
    if len(files) < 10:
        fail(f"only {len(files)} dependencies found in CMakeLists.txt: the parser is broken")
    bad = 0
    for entry in files:
        what, path = entry[0], entry[1]
        optional = len(entry) > 2 and entry[2]
        if not path or not os.path.exists(path):
            print(f"check_build_set: {what}: '{path}' does not exist", file=sys.stderr)
            bad += 1
            continue
        pkg = owner(path)
        if pkg is None:
            print(f"check_build_set: {what}: {path} belongs to no Debian package", file=sys.stderr)
            bad += 1
        elif pkg not in (allowed_optional if optional else allowed):
            print(f"check_build_set: {what}: {path} is in package {pkg}, which the build set "
                  f"({' '.join(build)}) does not install", file=sys.stderr)
            bad += 1
        else:
            print(f"ok  {what}: {path} ({pkg}{', optional: build or test set' if optional else ''})")
    if bad:
        sys.exit(1)
    print(f"check_build_set: {len(files)} dependencies, all in the build set")


if __name__ == "__main__":
    main()
