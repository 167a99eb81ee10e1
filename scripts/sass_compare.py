#!/usr/bin/env python3
"""Compares the sm_90 and sm_100a SASS of every kernel in two builds of the library, kernel by
kernel (a refactor that must leave the kernels unchanged shows 0 differing kernels).

usage: sass_compare.py BEFORE.a AFTER.a [--drop-param TYPE ...]
    CUOBJDUMP names cuobjdump if it is not on PATH (Triton's wheel carries one). --drop-param:
    kernels are matched by their demangled names with that parameter type removed (a change that
    appends a kernel parameter renames every kernel; their code may still be unchanged). Kernels
    only in AFTER are then new instances, reported but not counted as differences.
"""
import os
import re
import subprocess
import sys

CUOBJDUMP = os.environ.get("CUOBJDUMP", "cuobjdump")


def kernels(library, arch):
    """{kernel: [its SASS, one entry per object that holds it]}, white space folded; the hash
    of an anonymous namespace in a name is dropped (it changes with the file's path)."""
    text = subprocess.run([CUOBJDUMP, "--dump-sass", "--gpu-architecture", arch, library],
                          capture_output=True, text=True, check=True).stdout
    out, name, body = {}, None, []
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            if name:
                out.setdefault(name, []).append("\n".join(body))
            name, body = re.sub(r"_GLOBAL__N__[0-9a-f_]+?_", "_GLOBAL__N_", m.group(1)), []
        elif name and "/*" in line:
            body.append(re.sub(r"\s+", " ", line).strip())
    if name:
        out.setdefault(name, []).append("\n".join(body))
    return out


def renamed(found, dropped):
    """`found` keyed by demangled names without the `dropped` parameter types."""
    if not dropped:
        return found
    names = list(found)
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                               text=True, check=True).stdout.splitlines()
    out = {}
    for name, plain in zip(names, demangled):
        for t in dropped:
            plain = plain.replace(", " + t, "")
        out.setdefault(plain, []).extend(found[name])
    return out


def main():
    args = sys.argv[1:]
    dropped = [args[i + 1] for i, a in enumerate(args) if a == "--drop-param"]
    before, after = [a for i, a in enumerate(args)
                     if a != "--drop-param" and (i == 0 or args[i - 1] != "--drop-param")][:2]
    differing = 0
    for arch in ("sm_90", "sm_100a"):
        a, b = renamed(kernels(before, arch), dropped), renamed(kernels(after, arch), dropped)
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        diff = sorted(k for k in set(a) & set(b) if sorted(a[k]) != sorted(b[k]))
        print(f"{arch}: {len(a)} kernels before, {len(b)} after: "
              f"{len(set(a) & set(b)) - len(diff)} identical, {len(diff)} differ, "
              f"{len(only_a)} only before, {len(only_b)} only after")
        for k in (diff + only_a + ([] if dropped else only_b))[:20]:
            print("   ", k)
        differing += len(diff) + len(only_a) + (0 if dropped else len(only_b))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
