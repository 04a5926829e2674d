"""The README's examples as users run them: from a plain script, with and without an
``if __name__ == "__main__":`` guard (a spawned process pool re-runs an unguarded script)."""
import os
import subprocess
import sys
import textwrap

import pytest

BODY = """
import numpy as np
import tp_limits as tp
X = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]]); Y = np.array([[1.0], [-1.0], [1.0]])
data = tp.Routine(X, Y, lr=0.5)
print("top level ran")
"""
CALLS = {
    "coord_check": "tp.coord_check(tp.MLP(tp.mup(1), 2, 1), data, widths=[32, 64], seeds=2)",
    "convergence": "tp.convergence(tp.MLP(tp.mup(1), 2, 1), data, widths=[32, 64], seeds=2, "
                   "particles=2_000)",
    "simulate_limit(workers=2)": "tp.simulate_limit(tp.MLP(tp.mup(2), 2, 1), data, "
                                 "particles=2_000, replicates=2, workers=2)",
}


def run_script(tmp_path, code):
    path = tmp_path / "script.py"
    path.write_text(code)
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unguarded_script_runs_serially_with_a_message(name, tmp_path):
    res = run_script(tmp_path, BODY + CALLS[name] + "\nprint('done')\n")
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("top level ran") == 1 and "done" in res.stdout
    assert 'if __name__ == "__main__"' in res.stderr and "serially" in res.stderr


def test_guarded_script_uses_the_process_pool(tmp_path):
    code = BODY + textwrap.dedent(f"""
        def main():
            {CALLS['coord_check']}
            print("done")

        if __name__ == "__main__":
            main()
        """)
    res = run_script(tmp_path, code)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "serially" not in res.stderr
    # the workers import the script as a module: its top level runs once per worker too,
    # which is exactly why the guard is needed
    assert res.stdout.count("top level ran") >= 2 and "done" in res.stdout


def test_a_metric_the_pool_cannot_pickle_is_refused_before_any_work(tmp_path):
    """The guarded script of a user who passes a lambda as lr_sweep's metric: one clear
    SpecError naming the metric and the ways out, before the limit sweep runs, and no
    traceback from the pool's clean-up (it used to be a pickling traceback, then an
    AttributeError from the clean-up, or a hang)."""
    code = BODY + textwrap.dedent("""
        import time
        def main():
            started = time.perf_counter()
            try:
                tp.lr_sweep(tp.MLP(tp.mup(1), 2, 1), data, [0.1, 0.2, 0.4], widths=[32, 64],
                            seeds=2, metric=lambda tr: float(tr.loss[-1]), executor=None)
            except tp.SpecError as exc:
                print("refused in", round(time.perf_counter() - started, 2), "s:", exc)

        if __name__ == "__main__":
            main()
        """)
    res = run_script(tmp_path, code)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    line = next(l for l in res.stdout.splitlines() if l.startswith("refused in"))
    assert "metric cannot be sent to worker processes" in line
    assert "executor='serial'" in line and "Dask" in line
    assert float(line.split()[2]) < 2.0                    # before the limit sweep's work


def test_pool_workers_die_when_their_parent_is_killed(tmp_path):
    """SIGKILL runs no clean-up in the parent: the workers must not outlive it (they ask
    the kernel to be killed with it)."""
    import signal
    import time
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    path = tmp_path / "hang.py"
    path.write_text(textwrap.dedent("""
        import time
        from tp_limits.engine.executors import process_pool

        def slow(x):
            time.sleep(60)

        if __name__ == "__main__":
            with process_pool(2) as pool:
                futures = [pool.submit(slow, i) for i in range(2)]
                time.sleep(3)
                print(*pool._processes, flush=True)
                time.sleep(60)
        """))
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True)
    workers = [int(p) for p in proc.stdout.readline().split()]
    assert len(workers) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists(f"/proc/{p}") and
                                         "Z" not in open(f"/proc/{p}/stat").read().split()[2]
                                         for p in workers):
        time.sleep(0.2)
    alive = [p for p in workers if os.path.exists(f"/proc/{p}")
             and open(f"/proc/{p}/stat").read().split()[2] != "Z"]
    assert not alive, f"workers {alive} outlived their killed parent"
