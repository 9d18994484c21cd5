# torch_test_lib.py — what the Python tests against the PyTorch references share (imported, not
# run): the wgtrain binary they call, run() on it, the pass / fail counters behind check(), and
# finish(), which prints "N passed, N failed" and gives the exit code.
import os
import subprocess

WGTRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "wgtrain")
counts = {"passed": 0, "failed": 0}


def check(ok, what):
    if ok:
        counts["passed"] += 1
    else:
        counts["failed"] += 1
        print("FAIL", what)


def run(args, show_failure=False):
    """wgtrain ARGS..., its output captured (and printed when it fails, with show_failure)."""
    r = subprocess.run([WGTRAIN] + args, capture_output=True, text=True)
    if show_failure and r.returncode != 0:
        print(r.stdout, r.stderr)
    return r


def finish():
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0
