#!/usr/bin/env python3
"""The library's kernel set, as data: every __global__ template instantiation the build compiled,
read from the static library's host-side launch stubs (nm -C), the enum arguments spelled by
their names from the public headers, one section per kernel family.

  scripts/kernel_set.py LIBRARY.a                    # print the set
  scripts/kernel_set.py LIBRARY.a --check KERNELS    # exit 1 with a diff if it differs
  scripts/kernel_set.py LIBRARY.a --write KERNELS    # rewrite the committed list

src/instantiations/KERNELS.txt is the committed list; the host test `host.kernel_set` checks it,
so a change to what is instantiated shows up in review as a change to that file.
"""
import argparse
import collections
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HEADERS = ("include/cachestore/cachestore.h", "include/cachestore/layout.h")


def enum_names():
    """{"cachestore::MlaLayout": {0: "kV4", ...}, ...} from the public headers."""
    names = {}
    for header in HEADERS:
        text = open(os.path.join(ROOT, header)).read()
        for m in re.finditer(r"enum class (\w+)\s*:\s*\w+\s*\{([^}]*)\}", text):
            values, next_value = {}, 0
            for item in re.sub(r"//[^\n]*", "", m.group(2)).split(","):
                item = item.strip()
                if not item:
                    continue
                name, _, value = item.partition("=")
                next_value = int(value.strip(), 0) if value.strip() else next_value
                values[next_value] = name.strip()
                next_value += 1
            names["cachestore::" + m.group(1)] = values
    return names


def kernel_set(library):
    out = subprocess.run(["nm", "-C", library], capture_output=True, text=True, check=True).stdout
    names = enum_names()

    def spell(m):
        enum, value = m.group(1), int(m.group(2))
        return f"{enum.split('::')[-1]}::{names.get(enum, {}).get(value, value)}"

    kernels = set()
    for line in out.splitlines():
        m = re.search(r" [Tt] void cachestore::kernels::(\w+_kernel<.*>)\(cachestore::", line)
        if m is None or "[clone" in line:
            continue
        kernel = re.sub(r"\((cachestore::\w+)\)(-?\d+)", spell, m.group(1))
        kernels.add(kernel.replace("cachestore::kernels::", "").replace("cachestore::", ""))
    families = collections.defaultdict(list)
    for k in sorted(kernels):
        families[k.split("<")[0]].append(k)
    lines = [f"# {len(kernels)} kernels (scripts/kernel_set.py; host.kernel_set checks this file)"]
    for family, members in families.items():
        lines += ["", f"## {family} ({len(members)})"] + members
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("library")
    parser.add_argument("--check")
    parser.add_argument("--write")
    args = parser.parse_args()
    text = kernel_set(args.library)
    if args.write:
        open(args.write, "w").write(text)
    elif args.check:
        committed = open(args.check).read()
        if committed != text:
            sys.stdout.writelines(difflib.unified_diff(
                committed.splitlines(True), text.splitlines(True), args.check, "this build"))
            print(f"\nthe kernel set changed: scripts/kernel_set.py {args.library} --write "
                  f"{args.check}, and say why in the commit")
            return 1
        print(f"kernel set: {text.splitlines()[0][2:]}, as committed")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
