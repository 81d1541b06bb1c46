"""Executors: pickling rules, parallel multistart equal to serial, Dask, worker caches."""

from __future__ import annotations

import pickle

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from conftest import product_model_data


# ---------------------------------------------------------------------- pickling
@pytest.mark.parametrize("name", ["vdp", "cmg", "fa18-roll-ail"])
def test_models_and_experiments_of_the_registry_pickle(name):
    """A model travels as one casadi.Function: the copy's functions serialise
    exactly as the original's (same code-cache entries, same numbers)."""
    prob = pc.problem(name)
    model, exps = pickle.loads(pickle.dumps((prob.model, prob.experiments)))
    assert model.f.serialize() == prob.model.f.serialize()
    assert model.g.serialize() == prob.model.g.serialize()
    assert model.p_names == prob.model.p_names
    assert model.output_state_index == prob.model.output_state_index
    for a, b in zip(exps, prob.experiments):
        assert np.array_equal(a.inputs(a.t, model.nu), b.inputs(b.t, model.nu))
        assert np.array_equal(a.y, b.y, equal_nan=True)


def _strip(starts):
    return [{k: v for k, v in s.items() if k not in ("p_true", "wall_time")} for s in starts]


class _LockedInput:
    """An input callable holding a lock: no pickler sends it to another process."""

    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def __call__(self, t):
        return np.array([np.cos(t)])


def _forced_decay():
    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 2)
    u = ca.SX.sym("u")
    return pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + p[1] * u[0], name="decay",
                    p_names=["k", "b"])


# ---------------------------------------------------------------------- executors
def test_multistart_on_a_process_pool_equals_serial():
    """Same seed, same starts, same best estimate (bit for bit), usable result."""
    prob = pc.problem("fitzhugh-nagumo", seed=0)
    serial = prob.estimate(multistart=4, seed=2, uncertainty=False)
    pooled = prob.estimate(multistart=4, seed=2, uncertainty=False, n_jobs=2)
    assert np.array_equal(serial.p, pooled.p)
    assert _strip(serial.starts) == _strip(pooled.starts)
    # the result from a worker has the caller's model attached again
    assert np.allclose(pooled.predict(0), serial.predict(0), rtol=0, atol=1e-12)
    assert np.allclose(pooled.predict(0, source="collocation"),
                       serial.predict(0, source="collocation"), rtol=0, atol=1e-12)
    again = pc.estimate(prob.model, prob.experiments, pooled.p, warm_start=pooled,
                        p_bounds=prob.p_bounds, uncertainty=False, **prob.options)
    assert again.success and again.iterations <= 2
    assert np.allclose(again.p, serial.p, rtol=1e-6)


def test_a_log_normal_multistart_from_a_pool_profiles_as_serially():
    """The best start of a pool came back with the caller's model attached:
    for a log-normal output that is not the model the methods solved (its
    logarithm), and the profile re-fitted another problem (an SEIR's
    log10(rho) profiled around -1.64 for the estimate's -0.71, no warning)."""
    x, k = ca.SX.sym("x", 2), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=ca.vertcat(-k[0] * x[0], k[0] * x[0] - k[1] * x[1]),
                     y=x[1], p_names=["k1", "k2"], y_names=["B"])
    t = np.linspace(0.5, 8.0, 16)
    B = pc.simulate(model, [10.0, 0.0], [0.9, 0.3], t, t0=0.0)[:, 1]
    y = B * np.exp(0.1 * np.random.default_rng(0).standard_normal(t.size))
    exp = pc.Experiment(t, y, x0=[10.0, 0.0], t0=0.0)
    options = dict(estimate_x0=False, noise="log-normal", multistart=3, seed=1,
                   p_bounds=([0.01, 0.01], [5.0, 5.0]))
    serial = pc.estimate(model, [exp], [0.5, 0.5], **options)
    pooled = pc.estimate(model, [exp], [0.5, 0.5], n_jobs=2, **options)
    assert np.allclose(pooled.p, serial.p, rtol=1e-9)
    one, two = pc.profile(serial, parameters=[0]), pc.profile(pooled, parameters=[0])
    assert np.allclose(two.estimate, serial.p, rtol=1e-6), two.estimate
    assert two.wssr == pytest.approx(one.wssr, rel=1e-6)
    assert np.allclose(two.intervals[0], one.intervals[0], rtol=1e-4)


def test_multistart_on_a_dask_local_cluster_equals_serial():
    distributed = pytest.importorskip("distributed")
    prob = pc.problem("vdp", seed=1)
    serial = prob.estimate(multistart=3, seed=0, uncertainty=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        dasked = prob.estimate(multistart=3, seed=0, uncertainty=False,
                               executor=client.get_executor())
    assert np.array_equal(serial.p, dasked.p)
    assert _strip(serial.starts) == _strip(dasked.starts)
    assert dasked.predict(0).shape == serial.predict(0).shape


def test_lambda_inputs_travel_with_cloudpickle():
    pytest.importorskip("cloudpickle")
    model = _forced_decay()
    t = np.linspace(0, 4, 21)
    exp = pc.simulate_experiment(model, [1.0], [0.8, 0.5], t, lambda s: [np.sin(s)],
                                 noise_std=0.01, seed=0)
    kw = dict(p_bounds=([0.1, 0.1], [3.0, 3.0]), uncertainty=False, multistart=2)
    serial = pc.estimate(model, [exp], [1.0, 1.0], **kw)
    pooled = pc.estimate(model, [exp], [1.0, 1.0], n_jobs=2, **kw)
    assert np.array_equal(serial.p, pooled.p)


def test_an_input_that_cannot_be_sent_is_named_before_any_work():
    model = _forced_decay()
    t = np.linspace(0, 4, 21)
    exp = pc.simulate_experiment(model, [1.0], [0.8, 0.5], t, _LockedInput(),
                                 noise_std=0.01, seed=0, name="locked")
    with pytest.raises(TypeError, match=r"experiment 'locked' \(its input `u`.*module-level"):
        pc.estimate(model, [exp], [1.0, 1.0], p_bounds=([0.1, 0.1], [3.0, 3.0]),
                    multistart=2, n_jobs=2)


@pytest.mark.parametrize("kw, error", [
    (dict(n_jobs=0), ValueError), (dict(n_jobs="2"), ValueError), (dict(n_jobs=True), ValueError),
    (dict(executor=object()), TypeError),
    (dict(n_jobs=2, executor=None), None),
])
def test_executor_arguments_are_checked(kw, error):
    from picard_casadi.runtime.executors import executor_for

    if error is None:  # n_jobs with executor=None is fine
        with executor_for(**kw) as ex:
            assert ex is not None
        return
    with pytest.raises(error, match="n_jobs|executor"):
        with executor_for(**kw):
            pass


def test_executor_and_n_jobs_together_are_refused():
    from concurrent.futures import ThreadPoolExecutor

    prob = pc.problem("vdp", seed=0)
    with ThreadPoolExecutor(1) as ex, pytest.raises(ValueError, match="not both"):
        prob.estimate(multistart=2, executor=ex, n_jobs=2)


def test_warnings_of_a_worker_are_issued_in_the_caller():
    """Only the product a*b is identifiable: the worker's warning reaches the caller."""
    model, exp = product_model_data()
    with pytest.warns(UserWarning, match=r"combination of a, b"):
        res = pc.estimate(model, [exp], p0=[0.7, 1.2, 0.2], T=0.5, multistart=2,
                          p_bounds=([0.1, 0.1, 0.0], [5.0, 5.0, 1.0]), n_jobs=2)
    assert res.success


def test_starts_in_one_process_build_the_interval_functions_once(monkeypatch):
    from picard_casadi.estimation import setup as problem_setup

    calls = []
    real = problem_setup.build_interval_functions

    def counting(disc, n):
        calls.append((disc.K, disc.M, n))
        return real(disc, n)

    monkeypatch.setattr(problem_setup, "build_interval_functions", counting)
    prob = pc.problem("lotka-volterra", seed=0)  # a new model object: nothing built yet
    res = prob.estimate(multistart=3, seed=0, uncertainty=False)
    assert res.success
    assert len(calls) == len(set(calls)) == 1, calls


def test_a_worker_decodes_the_problem_once():
    from picard_casadi.runtime.executors import decoded, encode

    prob = pc.problem("vdp", seed=0)
    data = encode({"model": prob.model, "experiments": prob.experiments})
    first, second = decoded(data), decoded(data)
    assert first is second and first["model"] is not prob.model


_INTERRUPTED_SCRIPT = """
import signal
import time
import picard_casadi as pc

# Ctrl-C as an interactive program gets it (a test run started with `&` in a
# non-interactive shell inherits SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)


def slow(record):  # every iteration of a start takes 5 s: the workers stay busy
    time.sleep(5.0)


if __name__ == "__main__":
    prob = pc.problem("fitzhugh-nagumo", seed=0)
    print("running", flush=True)
    prob.estimate(multistart=8, seed=0, uncertainty=False, n_jobs=2, callback=slow)
    print("finished", flush=True)
"""


def test_ctrl_c_stops_a_pool_and_its_workers(tmp_path):
    """SIGINT to the caller only (not its workers): the call raises
    KeyboardInterrupt within seconds and the pool's processes are gone."""
    import signal
    import subprocess
    import sys
    import time

    psutil = pytest.importorskip("psutil")
    script = tmp_path / "interrupted.py"
    script.write_text(_INTERRUPTED_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        workers = []
        while time.monotonic() < deadline:
            workers = [c for c in parent.children(recursive=True)
                       if "spawn_main" in " ".join(c.cmdline())]
            if len(workers) >= 2:
                break
            time.sleep(0.2)
        assert len(workers) >= 2, "the pool's workers did not start"
        time.sleep(2.0)  # the workers are busy with starts
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "finished" not in out
    assert "KeyboardInterrupt" in err
    assert elapsed < 15, elapsed
    # stopped, not left to finish their 5 s iteration
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]


# ---------------------------------------------------------------------- compare
def _copy_of_vdp(seed=0, noise_std=None):
    """A registered problem's factory at module level: it can go to a worker."""
    return pc.problem("vdp", seed=seed)


_SAME = ("problem", "seed", "method", "success", "rel_error", "misfit", "iterations",
         "estimate", "message")


def test_compare_on_a_process_pool_gives_the_serial_rows():
    pc.register_problem("vdp-copy", _copy_of_vdp, "vdp through a user's factory")
    kw = dict(seeds=[0, 1], codegen=False)
    serial = pc.compare(["vdp", "vdp-copy"], ["picard-gn", "ipopt"], **kw)
    pooled = pc.compare(["vdp", "vdp-copy"], ["picard-gn", "ipopt"], n_jobs=2, **kw)
    assert [tuple(r[k] for k in _SAME) for r in serial] == \
        [tuple(r[k] for k in _SAME) for r in pooled]
    assert [(r["problem"], r["seed"], r["method"]) for r in pooled][:4] == [
        ("vdp", 0, "picard-gn"), ("vdp", 0, "ipopt"), ("vdp", 1, "picard-gn"), ("vdp", 1, "ipopt")]


def test_compare_names_an_unknown_problem_before_any_work():
    with pytest.raises(ValueError, match="unknown problem 'nope'"):
        pc.compare(["vdp", "nope"], ["picard-gn"], n_jobs=2)


def test_compare_on_a_thread_pool_gives_each_problem_its_own_cache(monkeypatch):
    # rows used to set $PICARD_CASADI_CACHE for the whole process: on a
    # thread pool one row compiled into another problem's cache, and the
    # variable could be left pointing at a deleted study folder afterwards
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from picard_casadi.runtime import codegen
    from picard_casadi.studies.registry import Problem

    before = os.environ.get("PICARD_CASADI_CACHE")
    overlap = threading.Barrier(2, timeout=60)
    seen = {}
    estimate = Problem.estimate

    def spy(self, *args, **kw):
        overlap.wait()  # both rows are inside their cache_at block now
        seen[self.name] = codegen.cache_path()
        overlap.wait()
        return estimate(self, *args, **kw)

    monkeypatch.setattr(Problem, "estimate", spy)
    with ThreadPoolExecutor(2) as ex:
        rows = pc.compare(["vdp", "lotka-volterra"], ["picard-gn"], seeds=[0],
                          codegen=False, executor=ex)
    assert all(r["success"] for r in rows)
    assert seen["vdp"] != seen["lotka-volterra"]
    assert all(path.name.startswith("picard_study_cache_") for path in seen.values())
    assert os.environ.get("PICARD_CASADI_CACHE") == before


def test_compare_rows_say_whether_the_mesh_certifies(tmp_path):
    # the protocol keeps each problem's mesh: a row on a mesh that does not
    # resolve the model said "ok" with nothing in the table to tell
    rows = pc.compare(["vdp"], ["picard-gn"], seeds=[0], codegen=False, out=tmp_path,
                      options={"vdp": {"T": 2.5}})
    assert rows[0]["success"] and not rows[0]["certified"]
    assert pc.compare(["vdp"], ["picard-gn"], seeds=[0], codegen=False)[0]["certified"]
    assert "| certified |" in (tmp_path / "table.md").read_text()
    assert ",certified," in (tmp_path / "table.csv").read_text().splitlines()[0]


def test_what_cannot_be_sent_gets_advice_for_what_it_is():
    # a callback that cannot be pickled was told to "use an array of inputs"
    import threading

    from picard_casadi.runtime.executors import _unpicklable

    note = _unpicklable({"kwargs": {"callback": threading.Lock()}}, TypeError("no"))
    assert note.startswith("`callback` cannot be sent") and "array of inputs" not in note


def test_a_script_without_the_main_guard_is_told_what_broke_the_pool(tmp_path):
    # the pool's processes import the script again (spawn) and start the work
    # there too: multiprocessing's own text and a bare BrokenProcessPool
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text("import picard_casadi as pc\n"
                      "pc.problem('vdp', seed=0).estimate(multistart=2, n_jobs=2)\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert run.returncode != 0
    # the workers print their own tracebacks on the same stderr, in any order
    ours = [line for line in run.stderr.splitlines()
            if line.startswith("RuntimeError: the process pool broke")]
    assert ours and 'if __name__ == "__main__":' in ours[0], run.stderr[-3000:]
    # each worker stops at the script's estimate, in one line, before fitting
    # again (a hydrologist's profile printed 109 lines, the fit run in each)
    assert "picard_casadi: estimate was called in a worker process" in run.stderr
    assert "bootstrapping phase" not in run.stderr, run.stderr[-3000:]


def test_a_start_where_the_model_is_not_finite_on_a_process_pool():
    """On a pool as in series: the start listed as failed, the run goes on."""
    from test_estimate import _sqrt_inflow

    model, exp = _sqrt_inflow()
    kw = dict(p_bounds=([0.1, 0.0], [5.0, 4.0]), multistart=4, seed=0, uncertainty=False)
    serial = pc.estimate(model, [exp], [0.5, 3.0], **kw)
    pooled = pc.estimate(model, [exp], [0.5, 3.0], n_jobs=2, **kw)
    assert repr(_strip(pooled.starts)) == repr(_strip(serial.starts))  # NaN where one failed
    assert any("not finite at the starting point" in s["message"] for s in pooled.starts)
    np.testing.assert_array_equal(pooled.p, serial.p)
