"""Sums JUnit XML reports (lit, GoogleTest, pytest) into the one line the test command ends with.

A report that is missing or unreadable counts as one failure, so a runner that crashed before
writing its report can never turn into a green summary.
"""
import sys
import xml.etree.ElementTree as ET


def count(path):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    passed = failed = skipped = 0
    for suite in suites:
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    return passed, failed, skipped


def main(paths):
    total = [0, 0, 0]
    for name in ("lit.xml", "unit.xml", "python.xml"):
        matches = [p for p in paths if p.endswith(name)]
        if not matches:
            print(f"{name}: missing report, counted as a failure")
            total[1] += 1
            continue
        try:
            p, f, s = count(matches[0])
        except (ET.ParseError, OSError) as e:
            print(f"{name}: unreadable report ({e}), counted as a failure")
            total[1] += 1
            continue
        print(f"{name}: {p} passed, {f} failed, {s} skipped")
        total = [total[0] + p, total[1] + f, total[2] + s]
    if total[2]:
        print(f"{total[2]} skipped (GPU tests skip where there is no GPU)")
    print(f"{total[0]} passed, {total[1]} failed")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
