#!/usr/bin/env python3
"""Prints the names of the failed tests in a meson testlog.json when every failure is
LeakSanitizer's tracer crash (its stop-the-world thread segfaulting at exit, "Tracer caught
signal 11" then "LeakSanitizer has encountered a fatal error": google/sanitizers#1353), and
nothing when any failure is something else (a leak report, an ASan or UBSan finding, a failed
check), so that CI runs only the former again. Usage: lsan_tracer_flakes.py TESTLOG_JSON"""
import json
import sys

CRASH = ("Tracer caught signal 11", "LeakSanitizer has encountered a fatal error")
FINDINGS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
            "SUMMARY: ", ":F:")


def main(path):
    names = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            t = json.loads(line)
            if t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
                continue
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            if not all(c in out for c in CRASH) or any(x in out for x in FINDINGS):
                return 0  # a real failure: no retry
            names.append(t["name"].split(" / ")[-1])  # "project:suite / name"
    print(" ".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
