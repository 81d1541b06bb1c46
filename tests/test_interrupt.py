"""Ctrl-C from every phase ends as KeyboardInterrupt (status 130 from the CLI).

Each case runs in a subprocess (its own process group, as a terminal's
Ctrl-C reaches the whole group).  The child marks, on a dedicated pipe, the
moment a phase starts (a wrapper around the package function that begins
it); the parent then waits a moment, so that the signal lands inside the
phase's long C++ loop (CVODES, IPOPT, the C compiler), and sends SIGINT.
The workloads run for 10 s or more, so the signal cannot miss them; phases
that are pure Python/NumPy are interrupted from inside the wrapper (the
child signals itself), which is deterministic.

Before the fix: during the guess the interrupt was swallowed (the estimate
went on and returned), CVODES turned it into a ``SimulationError``, IPOPT
into ``success=False``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from picard_casadi.runtime import codegen

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and process groups")

CHILD = textwrap.dedent(r'''
    import faulthandler, os, signal, sys, time
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, if it does
    # Ctrl-C as an interactive program gets it: a test run started in the
    # background of a non-interactive shell (`pytest &`) inherits SIGINT ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    MARK, phase, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    import numpy as np, casadi as ca
    import picard_casadi as pc
    import picard_casadi.estimate, picard_casadi.simulate  # (shadowed by functions of pc)
    mod = sys.modules

    def mark():
        os.write(MARK, b"ready\n")

    def marked(module, name, self_signal=False):
        """Wrap module.name: mark when it starts (and signal ourselves, if asked)."""
        real = getattr(module, name)
        def wrapper(*args, **kwargs):
            mark()
            if self_signal:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler runs long before this ends
            return real(*args, **kwargs)
        setattr(module, name, wrapper)

    def oscillator():
        x = ca.SX.sym("x", 2); p = ca.SX.sym("p")
        return pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p * x[0]), y=x[0:1], name="fast")

    LONG_IPOPT = {"acceptable_iter": 0, "acceptable_tol": 1e-300, "acceptable_dual_inf_tol": 1e-300,
                  "acceptable_constr_viol_tol": 1e-300, "acceptable_compl_inf_tol": 1e-300,
                  "acceptable_obj_change_tol": 0.0, "tiny_step_tol": 0.0, "tiny_step_y_tol": 0.0,
                  "max_cpu_time": 60.0}
    NEVER = dict(gtol=0.0, ftol=0.0, gap_tol=0.0, fixed_point_tol=0.0, max_iter=10**6)

    def run():
        prob = pc.problem("vdp", seed=0)
        kw = dict(prob.options, codegen=False)
        if phase == "guess":          # CVODES inside the initial guess (20 s)
            marked(mod["picard_casadi.simulate"], "simulate")
            model = oscillator()
            t = np.linspace(0, 300, 301)
            exp = pc.Experiment(t, np.cos(t)[:, None], x0=[1.0, 0.0])
            return pc.estimate(model, [exp], [1e6], "picard-gn", T=1.0, codegen=False)
        if phase == "cvodes":         # a plain simulation (20 s)
            mark()
            return pc.simulate(oscillator(), [1, 0], [1e6], np.linspace(0, 300, 11))
        if phase == "compile":        # gcc running (the whole process group gets SIGINT)
            import picard_casadi.runtime.codegen as cg
            marked(cg, "_compile_c")
            return prob.estimate("picard-gn", codegen=True, uncertainty=False)
        if phase == "compile-threads":  # six libraries compiled side by side, cold
            import picard_casadi.runtime.codegen as cg
            marked(cg, "_compile_c")
            return pc.problem("cmg", seed=0).estimate("picard", codegen=True, max_iter=1,
                                                      uncertainty=False, refine=False)
        if phase == "compile-nlp":    # IPOPT's NLP: its C files compiled side by side
            import picard_casadi.runtime.codegen as cg
            marked(cg, "_compile_objects")
            return pc.problem("cmg", seed=0).estimate("ipopt", codegen=True, max_iter=1,
                                                      uncertainty=False, refine=False)
        if phase in ("picard", "picard-gn"):
            state = {"first": True}
            def callback(rec):
                if state["first"]:
                    state["first"] = False
                    mark()
            # picard-gn ends at the floor of double precision whatever the
            # tolerances (vdp after 23 iterations, 0.2 s): cmg's 38 take 4 s
            return pc.problem("vdp" if phase == "picard" else "cmg", seed=0).estimate(
                phase, callback=callback, uncertainty=False, codegen=False, **NEVER)
        if phase == "ipopt":          # inside IPOPT's iterations (60 s budget)
            import picard_casadi.methods.ipopt as ip
            marked(ip, "run_nlp")
            return prob.estimate("ipopt", uncertainty=False, codegen=False, max_iter=10**6,
                                 tol=1e-300, ipopt_options=LONG_IPOPT)
        if phase == "shooting":       # IPOPT with CVODES inside
            import picard_casadi.methods.shooting as sh
            marked(sh, "run_nlp")
            return prob.estimate("shooting", uncertainty=False, codegen=False, max_iter=10**6,
                                 tol=1e-300, ipopt_options=LONG_IPOPT)
        if phase == "setup":
            import picard_casadi.estimation.setup as ps
            marked(ps, "build_interval_functions", self_signal=True)
            return prob.estimate("picard-gn", codegen=False)
        if phase == "uncertainty":
            import picard_casadi.analysis.uncertainty as unc
            marked(unc, "attach_uncertainty", self_signal=True)
            return prob.estimate("picard-gn", codegen=False)
        if phase == "plotting":
            import picard_casadi.transcription.predict as pred
            res = prob.estimate("picard-gn", codegen=False, uncertainty=False)
            marked(pred, "simulate", self_signal=True)
            from picard_casadi.io.plotting import plot_fit
            return plot_fit(res, prob.model, prob.experiments)
        if phase.startswith("cli-"):
            from picard_casadi.cli import commands as cli
            what = phase[4:]
            if what == "ipopt":
                import picard_casadi.methods.ipopt as ip
                import picard_casadi.studies.registry as reg
                marked(ip, "run_nlp")
                real_problem = reg.problem
                def problem(*a, **k):
                    p = real_problem(*a, **k)
                    p.options.update(max_iter=10**6, tol=1e-300, ipopt_options=LONG_IPOPT)
                    return p
                reg.problem = problem
                argv = ["run", "vdp", "--method", "ipopt", "--codegen", "off"]
            elif what == "guess":
                marked(mod["picard_casadi.simulate"], "simulate")
                argv = ["run", "vdp", "--codegen", "off"]
                import picard_casadi.studies.registry as reg
                real_problem = reg.problem
                def problem(*a, **k):
                    p = real_problem(*a, **k)
                    model = oscillator()
                    t = np.linspace(0, 300, 301)
                    p.model, p.p0, p.p_bounds, p.p_true = model, np.array([1e6]), None, np.array([1e6])
                    p.experiments = [pc.Experiment(t, np.cos(t)[:, None], x0=[1.0, 0.0])]
                    p.options = {"T": 1.0}
                    return p
                reg.problem = problem
            elif what == "plot":
                import picard_casadi.io.plotting as plotting
                marked(plotting, "plot_fit", self_signal=True)
                argv = ["run", "vdp", "--codegen", "off"]
            return sys.exit(cli.main(argv + ["--out", out, "--quiet"]))
        raise SystemExit(f"unknown phase {phase}")

    try:
        result = run()
        print("RESULT finished", getattr(result, "success", None), getattr(result, "message", ""))
        sys.exit(0)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("KeyboardInterrupt")
        sys.exit(130)
    except BaseException as err:
        if isinstance(err, SystemExit):
            raise
        print("EXC", type(err).__name__, err)
        sys.exit(3)
''')


def _run(tmp_path, phase, delay=0.5, timeout=120.0, group=True, sig=signal.SIGINT):
    """Run ``phase`` in a child and send SIGINT ``delay`` s after it starts: to
    the child's process group (a terminal's Ctrl-C), or with ``group=False``
    to the child alone (Jupyter interrupting a kernel, ``kill -INT pid``).
    The child's temporary files (the compilers' too) go to ``tmp_path/tmp``."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "out"
    (tmp_path / "tmp").mkdir(exist_ok=True)
    r, w = os.pipe()
    env = dict(os.environ, PICARD_CASADI_CACHE=str(tmp_path / "cache"),
               TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen([sys.executable, str(script), str(w), phase, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            pass_fds=(w,), env=env, start_new_session=True)
    os.close(w)
    signalled = time.monotonic()
    marked = False
    try:
        ready, _, _ = select.select([r], [], [], timeout)
        marked = bool(ready) and os.read(r, 100).startswith(b"ready")
        if marked and delay is not None:  # None: the child signals itself
            time.sleep(delay)
            signalled = time.monotonic()
            if group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the child's stacks, for the report
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(f"phase {phase} (marked={marked}) did not end within {timeout} s "
                        f"of Ctrl-C:\n{stdout}\n{stderr}")
    finally:
        os.close(r)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert marked, f"phase {phase} never started:\n{stdout}\n{stderr}"
    return proc.returncode, stdout, stderr, time.monotonic() - signalled, out


# phase, seconds to wait after the mark (inside the long loop); None: the child
# signals itself inside the phase
LIBRARY_PHASES = [("guess", 1.0), ("cvodes", 1.0), ("picard", 0.5), ("picard-gn", 0.5),
                  ("ipopt", 1.0), ("shooting", 1.5), ("setup", None), ("uncertainty", None),
                  ("plotting", None)]


@pytest.mark.parametrize("phase,delay", LIBRARY_PHASES, ids=[p for p, _ in LIBRARY_PHASES])
def test_interrupt_propagates_from_every_phase(tmp_path, phase, delay):
    code, stdout, stderr, after, _ = _run(tmp_path, phase, delay)
    assert code == 130 and stdout.strip().endswith("KeyboardInterrupt"), (stdout, stderr)
    assert after < 10.0, f"took {after:.1f} s to stop after Ctrl-C"
    assert "Traceback" not in stderr, stderr


@pytest.mark.skipif(codegen.find_compiler() is None, reason="no C compiler")
def test_interrupt_during_a_compile_leaves_no_partial_cache_entry(tmp_path):
    code, stdout, stderr, after, _ = _run(tmp_path, "compile", 0.2)
    assert code == 130 and stdout.strip().endswith("KeyboardInterrupt"), (stdout, stderr)
    cache = tmp_path / "cache"
    names = sorted(p.name for p in cache.iterdir()) if cache.exists() else []
    assert not [n for n in names if n.endswith((".tmp", ".part"))], names
    libs = {n[:-3] for n in names if n.endswith(".so")}
    metas = {n[:-5] for n in names if n.endswith(".json")}
    assert libs == metas, names  # every library has its checksum: nothing half-built


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of the running processes that name ``text``."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                found.append(cmd[:200])
    return found


@pytest.mark.skipif(codegen.find_compiler() is None or not os.path.isdir("/proc"),
                    reason="no C compiler, or no /proc to list processes")
@pytest.mark.parametrize("phase", ["compile-threads", "compile-nlp"])
def test_interrupt_to_the_process_alone_stops_its_compilers(tmp_path, phase):
    """SIGINT to the Python process only: the compilers it started (each in a
    process group of its own) are stopped with their passes and temporary
    files, and nothing queued is compiled.  Before: the queue of the paper's
    algorithm was compiled to its end (5-9 s) and, for IPOPT's NLP, ``cc1``
    ran on with a 30 MB ``/tmp/cc*.s``."""
    code, stdout, stderr, after, _ = _run(tmp_path, phase, 1.0, group=False)
    assert code == 130 and stdout.strip().endswith("KeyboardInterrupt"), (stdout, stderr)
    assert after < 5.0, f"took {after:.1f} s to stop after Ctrl-C"
    assert "virtual machine" not in stderr, stderr  # an interrupt is no compiler failure
    time.sleep(0.5)
    assert _processes_mentioning(str(tmp_path)) == []
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []


@pytest.mark.skipif(codegen.find_compiler() is None or not os.path.isdir("/proc"),
                    reason="no C compiler, or no /proc to list processes")
def test_sigterm_to_the_process_alone_stops_its_compilers_and_removes_the_build(tmp_path):
    """``timeout``, a batch scheduler or ``kill`` stops a script with SIGTERM,
    whose default action ends the process without clean-up: a robotics user's
    ``cc`` ran on for 7 minutes after its script and left 24-273 MB folders.
    While the package builds, SIGTERM stops the compilers, removes the build
    folder and exits with status 143, as the default action would have."""
    code, stdout, stderr, after, _ = _run(tmp_path, "compile-nlp", 1.0, group=False,
                                          sig=signal.SIGTERM)
    assert code == 143, (stdout, stderr)
    assert after < 5.0, f"took {after:.1f} s to stop after SIGTERM"
    time.sleep(0.5)
    assert _processes_mentioning(str(tmp_path)) == []
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []


CLI_PHASES = [("cli-guess", 1.0), ("cli-ipopt", 1.0), ("cli-plot", None)]


@pytest.mark.parametrize("phase,delay", CLI_PHASES, ids=[p for p, _ in CLI_PHASES])
def test_cli_exits_130_with_one_line_and_no_output(tmp_path, phase, delay):
    code, stdout, stderr, after, out = _run(tmp_path, phase, delay)
    assert code == 130, (stdout, stderr)
    assert stderr.strip() == "picard-casadi run: interrupted", stderr
    assert not out.exists(), sorted(out.iterdir())
    assert after < 10.0


# ---------------------------------------------------------------------- the mechanism, in process
@pytest.fixture
def interactive_sigint():
    """SIGINT handled as in an interactive program (Python's default handler) for
    the test: a test run started with `&` from a non-interactive shell inherits
    it ignored, and an ignored SIGINT is rightly left ignored by the package."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("interactive_sigint")
def test_a_retried_evaluation_fails_at_once_inside_repeated_interrupts():
    """What IPOPT does with an evaluation a Ctrl-C failed: it tries another
    point.  Emulated by a loop that catches CasADi's error and integrates again
    (20 s each); inside ``repeated_interrupts`` each retry fails at once.  (An
    IPOPT shooting solve whose solution blew up did not stop in 563 s.)"""
    import threading

    import casadi as ca

    from picard_casadi.runtime.interrupts import interruptible, repeated_interrupts

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p")
    F = ca.integrator("slow", "cvodes", {"x": x, "p": p, "ode": ca.vertcat(x[1], -p * x[0])},
                      0.0, 300.0, {"abstol": 1e-10, "reltol": 1e-10, "max_num_steps": 10**9})
    main = threading.main_thread().ident
    retries = []
    threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT)).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with interruptible(), repeated_interrupts():
            for _ in range(5):
                try:
                    F(x0=[1.0, 0.0], p=1e6)
                except RuntimeError:
                    retries.append(time.monotonic())
    stopped = time.monotonic() - t0
    assert retries, "the first evaluation was not failed by the interrupt"
    assert stopped < 4.0, f"{len(retries)} evaluation(s) failed; stopped after {stopped:.1f} s"
    # outside the block nothing is sent again
    time.sleep(0.3)


@pytest.mark.usefixtures("interactive_sigint")
def test_interruptible_reraises_what_casadi_absorbed():
    """CVODES in this process: the handler records the interrupt, the block re-raises it.
    (The simulation would take minutes: with the default ``max_steps`` CVODES
    gave up after its 100000 steps within the timer's 0.5 s on a fast core,
    CV_TOO_MUCH_WORK instead of the interrupt.)"""
    import casadi as ca
    import numpy as np

    import picard_casadi as pc

    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p * x[0]), name="fast")
    import threading

    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            pc.simulate(model, [1, 0], [1e6], np.linspace(0, 3000, 11), max_steps=10**9)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 10
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_is_interrupt_recognises_the_disguises():
    from picard_casadi.runtime.interrupts import is_interrupt

    assert is_interrupt(RuntimeError("... KeyboardInterruptException ..."))
    assert is_interrupt(RuntimeError('CVode returned "CV_RHSFUNC_FAIL"'),
                        "rhs failed: KeyboardInterrupt\nAt t = 1.5")
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("<built-in function x> returned a result with an exception set")
    except SystemError as err:
        assert is_interrupt(err)
    assert not is_interrupt(RuntimeError('CVode returned "CV_TOO_MUCH_WORK"'))


@pytest.mark.usefixtures("interactive_sigint")
def test_nested_blocks_and_an_application_handler():
    from picard_casadi.runtime.interrupts import interruptible

    seen = []

    def own(signum, frame):  # an application that handles Ctrl-C itself
        seen.append(signum)

    previous = signal.signal(signal.SIGINT, own)
    try:
        with interruptible():
            with interruptible():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
        assert seen == [signal.SIGINT]  # its handler ran, no KeyboardInterrupt forced
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)
    with pytest.raises(KeyboardInterrupt):
        with interruptible():
            with interruptible():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)


def test_ignored_sigint_stays_ignored():
    from picard_casadi.runtime.interrupts import interruptible

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interruptible():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_second_interrupt_does_not_stop_the_clean_up(tmp_path, monkeypatch):
    """Ctrl-C pressed twice: the temporary files still go, the folder too."""
    from pathlib import Path

    from picard_casadi.runtime.output_files import AtomicOutputs

    real_unlink = Path.unlink

    def unlink(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, mid clean-up
        return real_unlink(self, *args, **kwargs)

    folder = tmp_path / "new" / "res"
    with pytest.raises(KeyboardInterrupt):
        with AtomicOutputs(folder) as out:
            out.write_text("result.json", "{}")
            out.write_text("table.md", "x")
            monkeypatch.setattr(Path, "unlink", unlink)
            raise KeyboardInterrupt
    monkeypatch.undo()
    assert not (tmp_path / "new").exists()
