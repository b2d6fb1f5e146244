"""Writes SKIPS.md from two runs of torch's suite (pytest --junitxml): on hpshmem and on gloo.

    BACKEND=hpshmem HP_TORCH_SUITE=all python -m pytest tests/torch_suite --junitxml=hpshmem.xml
    BACKEND=gloo HP_TORCH_SUITE=all python -m pytest tests/torch_suite --junitxml=gloo.xml
    python tests/torch_suite/report.py hpshmem.xml [more-hpshmem.xml ...] --gloo gloo.xml > tests/torch_suite/SKIPS.md

Later hpshmem files override earlier ones test by test (a rerun of some tests after a fix).
"""

import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

from conftest import TORCH_REFUSES


def outcomes(path):
    """{test name: (outcome, message)}, outcome one of passed / failed / skipped."""
    res = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name")
        for kind, outcome in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
            el = case.find(kind)
            if el is not None:
                lines = [ln.strip() for ln in ((el.get("message") or "") + "\n" + (el.text or "")).splitlines()]
                errors = [ln for ln in lines if re.match(r"^(E\s+)?[\w.]*(Error|Exception): ", ln)]
                msg = re.sub(r"^E\s+", "", errors[-1]) if errors else next((ln for ln in lines if ln), "")
                res[name] = (outcome, msg)
                break
        else:
            res[name] = ("passed", "")
    return res


def main(argv):
    gloo_path = argv[argv.index("--gloo") + 1] if "--gloo" in argv else None
    ours = {}
    for path in [a for a in argv if a.endswith(".xml") and a != gloo_path]:
        ours.update(outcomes(path))
    gloo = outcomes(gloo_path) if gloo_path else {}
    count = defaultdict(int)
    for outcome, _ in ours.values():
        count[outcome] += 1
    print("# torch's distributed suite on hpshmem: what does not run, and why\n")
    print(
        "`HP_TORCH_SUITE=all python -m pytest tests/torch_suite` (`make test-full`), BACKEND=hpshmem, WORLD_SIZE=2, "
        "on this 2-core CPU host, torch 2.13.0: "
        f"{count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped. The suite decides at import, "
        "by the backend's name, which tests apply; the driver holds hpshmem to gloo's decisions (the suite is "
        "imported as for gloo), so every test that gloo runs on this host runs on hpshmem. Written by "
        "`tests/torch_suite/report.py` from the run and from the same tests on gloo.\n"
    )
    # xfail (conftest.TORCH_REFUSES) shows as a skip with its reason in the XML; those are listed here.
    known = {n for n, (o, m) in ours.items() if o == "failed" or (o == "skipped" and n in TORCH_REFUSES)}
    failed = sorted(known)
    if failed:
        print("## Failed on hpshmem\n")
        print(
            "Tests listed in `conftest.py` (TORCH_REFUSES) are expected to fail (strict xfail), for the reason given.\n"
        )
        print("| test | hpshmem | gloo | why |")
        print("|---|---|---|---|")
        for n in failed:
            g = gloo.get(n)
            on_gloo = g[0] + (": " + g[1][:120] if g[1] else "") if g else "not run"
            print(f"| {n} | {ours[n][1][:160]} | {on_gloo} | {TORCH_REFUSES.get(n, 'a fault to fix')} |")
        print()
    by_reason = defaultdict(list)
    for n, (o, msg) in ours.items():
        if o == "skipped" and n not in known:
            by_reason[msg.replace("|", "/")].append(n)
    print("## Skipped, by the suite's own reason\n")
    print("The last column says what the same tests did on gloo on this host.\n")
    print("| tests | reason (the suite's message) | on gloo |")
    print("|---|---|---|")
    for msg, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        names.sort()
        shown = ", ".join(names[:6]) + (f", … ({len(names)} in all)" if len(names) > 6 else "")
        on_gloo = sorted({gloo[n][0] for n in names if n in gloo}) or ["not run"]
        print(f"| {shown} | {msg} | {' / '.join(on_gloo)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
