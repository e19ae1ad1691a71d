#!/usr/bin/python3
"""Every ctest test of a build directory has a TIMEOUT and LABELS (tests/CMakeLists.txt sets them through
predrop_test / predrop_gtest; a property lost on the way leaves a test with ctest's 1500 s default and
outside every label filter of scripts/test.sh). Reads `ctest --show-only=json-v1`, which runs the gtest
discovery, so discovered tests are checked with what ctest will really apply to them.

usage: check_test_properties.py CTEST BUILD_DIR"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ctest, build_dir = sys.argv[1:]
    r = subprocess.run([ctest, "--show-only=json-v1"], cwd=build_dir, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    if r.returncode != 0:
        print("FAIL: ctest --show-only=json-v1 in %s exited %d:\n%s" % (build_dir, r.returncode, r.stderr))
        return 1
    tests = json.loads(r.stdout).get("tests", [])
    if not tests:
        print("FAIL: ctest lists no tests in %s" % build_dir)
        return 1
    bad = []
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        missing = [p for p in ("TIMEOUT", "LABELS") if not props.get(p)]
        if missing:
            bad.append("%s: no %s" % (t["name"], " and no ".join(missing)))
    if bad:
        print("FAIL: %d of %d tests lack a property (set them with predrop_test, predrop_script_test or "
              "predrop_gtest of tests/CMakeLists.txt):" % (len(bad), len(tests)))
        print("\n".join("  " + b for b in bad))
        return 1
    print("ok: all %d tests have a TIMEOUT and LABELS" % len(tests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
