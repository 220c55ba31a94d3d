#!/usr/bin/env python3
"""Checks that accmon's module dependencies point one way (docs/ARCHITECTURE.md, "Layers").

Usage: check-layering.py [DESCRIBE_JSON]   (default: runs `swift package describe --type json` in the repository)
       check-layering.py --self-test       (feeds the checks layouts that break each rule; each must be refused)

Rules:
1. A module depends only on modules of a lower layer (LAYERS below); a module missing from LAYERS is an error, so a
   new module must be placed.
2. Every module a source file imports that is built by this package is declared as a dependency of its target
   (Package.swift declares what each target imports).
3. The pure modules import no C module, no Glibc and no AccmonSys: no I/O.
4. The client product's closure holds only what a client needs: none of CLIENT_EXCLUDED.
Prints one line per violation as `layering: TARGET: reason` and exits 1 when there is any.
"""
import json
import os
import re
import subprocess
import sys

# Layer of each module: a module may depend only on modules of a strictly lower layer.
LAYERS = {
    # C libraries and shims
    "CAccmonShims": 0, "CUdev": 0, "CSystemd": 0, "CCrypto": 0, "CMosquitto": 0,
    # system calls; pure logic
    "AccmonSys": 1, "AccmonJSON": 1, "AccmonProtocol": 1, "AccmonOptions": 1,
    # pure logic built on the protocol; adapters over C libraries
    "AccmonManifest": 2, "AccmonDevices": 2, "AccmonNodes": 2, "AccmonCrypto": 1, "AccmonSystemd": 2, "AccmonMQTT": 2,
    "AccmonUdev": 3, "AccmonLogging": 3, "AccmonClient": 3,
    # the programs' machinery
    "AccmondKit": 4, "AccmonBridge": 4, "AccmonNodeHelper": 4,
    # executables and tests
    "accmond": 5, "accmon": 5, "accmon-mqtt": 5, "accmon-nodes": 5, "AccmonExampleWatcher": 5,
    "AccmonTestSupport": 2,
}
TEST_LAYER = 6
PURE = {"AccmonJSON", "AccmonProtocol", "AccmonOptions", "AccmonDevices"}
IMPURE_IMPORTS = {"Glibc", "AccmonSys", "Foundation"} | {name for name, layer in LAYERS.items() if layer == 0}
CLIENT_PRODUCT = "AccmonClient"
CLIENT_EXCLUDED = {"AccmonManifest", "AccmonDevices", "AccmonUdev", "AccmonSystemd", "AccmonLogging", "AccmondKit",
                   "AccmonNodes", "AccmonNodeHelper",
                   "AccmonJSON", "AccmonCrypto", "CUdev", "CSystemd", "CCrypto", "AccmonMQTT", "CMosquitto"}
IMPORT = re.compile(r"^\s*(?:@_exported\s+|@testable\s+)?(?:(?:public|package|internal)\s+)?import\s+([A-Za-z_][A-Za-z0-9_]*)",
                    re.M)


def layer(target):
    if target["type"] == "test":
        return TEST_LAYER
    return LAYERS.get(target["name"])


def closure(targets, name):
    seen, stack = set(), [name]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        stack.extend(targets[current].get("target_dependencies", []))
    return seen


def check(description, read_imports):
    """Returns the violations of `description` (swift package describe's JSON); `read_imports(target)` gives the
    modules a target's sources import."""
    targets = {target["name"]: target for target in description["targets"]}
    problems = []
    for name, target in sorted(targets.items()):
        own = layer(target)
        if own is None:
            problems.append(f"{name}: not placed in a layer (add it to LAYERS in scripts/check-layering.py)")
            continue
        dependencies = target.get("target_dependencies", [])
        for dependency in dependencies:
            other = layer(targets[dependency]) if dependency in targets else None
            if other is None:
                continue  # reported for that target itself
            if other >= own:
                problems.append(f"{name}: depends on {dependency}, which is not below it "
                                f"(layer {own} -> layer {other})")
        imported = read_imports(target)
        for module in sorted(imported):
            if module in targets and module != name and module not in dependencies:
                problems.append(f"{name}: imports {module} without declaring it as a dependency in Package.swift")
        if name in PURE:
            for module in sorted(imported & IMPURE_IMPORTS):
                problems.append(f"{name}: a pure module imports {module}")
            for dependency in dependencies:
                if dependency in IMPURE_IMPORTS:
                    problems.append(f"{name}: a pure module depends on {dependency}")
    if CLIENT_PRODUCT in targets:
        for module in sorted(closure(targets, CLIENT_PRODUCT) & CLIENT_EXCLUDED):
            problems.append(f"{CLIENT_PRODUCT}: its closure contains {module}, which a client does not need")
    return problems


def imports_from_sources(root):
    def read(target):
        found = set()
        for directory, _, files in os.walk(os.path.join(root, target["path"])):
            for file in files:
                if file.endswith(".swift"):
                    with open(os.path.join(directory, file), encoding="utf-8") as handle:
                        found.update(IMPORT.findall(handle.read()))
        return found
    return read


def self_test():
    """Each broken layout must give the expected violation; the sound one none."""
    def target(name, deps=(), kind="library"):
        return {"name": name, "type": kind, "path": name, "target_dependencies": list(deps)}
    sound = [target("CAccmonShims"), target("AccmonSys", ["CAccmonShims"]), target("AccmonProtocol"),
             target("AccmonManifest", ["AccmonProtocol", "AccmonSys"]),
             target("AccmonClient", ["AccmonProtocol", "AccmonSys"])]
    imports = {"AccmonSys": {"Glibc", "CAccmonShims"}, "AccmonManifest": {"AccmonProtocol", "AccmonSys"},
               "AccmonClient": {"AccmonProtocol", "AccmonSys"}, "AccmonProtocol": {"FoundationEssentials"}}
    cases = [
        ("sound", sound, imports, None),
        ("AccmonSys importing an Accmon module", sound[:1] + [target("AccmonSys", ["CAccmonShims", "AccmonProtocol"])]
         + sound[2:], imports, "AccmonSys: depends on AccmonProtocol"),
        ("an undeclared import", sound, dict(imports, AccmonClient={"AccmonProtocol", "AccmonSys", "AccmonManifest"}),
         "AccmonClient: imports AccmonManifest without declaring it"),
        ("the client closure holding the manifest", sound[:4] + [target("AccmonClient", ["AccmonManifest"])], imports,
         "AccmonClient: its closure contains AccmonManifest"),
        ("a pure module doing I/O", sound, dict(imports, AccmonProtocol={"Glibc"}),
         "AccmonProtocol: a pure module imports Glibc"),
        ("a module in no layer", sound + [target("AccmonNew")], imports, "AccmonNew: not placed in a layer"),
    ]
    failures = 0
    for title, layout, imported, expected in cases:
        problems = check({"targets": layout}, lambda t: imported.get(t["name"], set()))
        ok = (not problems) if expected is None else any(p.startswith(expected) for p in problems)
        print(f"{'PASS' if ok else 'FAIL'}: {title}" + ("" if ok else f": got {problems}"))
        failures += not ok
    return 1 if failures else 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as handle:
            description = json.load(handle)
    else:
        swift = os.environ.get("SWIFT", "swift")
        output = subprocess.run([swift, "package", "describe", "--type", "json"], cwd=root, check=True,
                                capture_output=True, text=True).stdout
        description = json.loads(output[output.index("{"):])
    problems = check(description, imports_from_sources(root))
    for problem in problems:
        print(f"layering: {problem}")
    if not problems:
        count = len(description["targets"])
        print(f"layering: {count} targets, every dependency points down")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
