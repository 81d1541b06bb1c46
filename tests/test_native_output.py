"""Capturing what native code prints: nested and concurrent captures restore the streams."""

from __future__ import annotations

import os
import sys
import threading

from picard_casadi.runtime.native_output import captured_native_output, released_output


def _fd_identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_native_and_python_output_are_captured_and_nested_blocks_get_their_own(capfd):
    before = (_fd_identity(1), _fd_identity(2), sys.stdout, sys.stderr)
    with captured_native_output() as outer:
        os.write(1, b"native one\n")
        with captured_native_output() as inner:
            os.write(2, b"native two\n")
            print("python two")
        print("python one")
    assert "native two" in inner[0] and "python two" in inner[0]
    assert "native one" not in inner[0] and "python one" not in inner[0]
    assert all(part in outer[0] for part in ("native one", "native two", "python one"))
    assert (_fd_identity(1), _fd_identity(2), sys.stdout, sys.stderr) == before
    print("after")
    assert "after" in capfd.readouterr().out


def test_released_output_reaches_the_real_stream(capfd):
    with captured_native_output() as printed:
        print("swallowed")
        with released_output():
            print("progress line")
        print("swallowed too")
    out = capfd.readouterr().out
    assert "progress line" in out and "swallowed" not in out
    assert "swallowed too" in printed[0] and "progress line" not in printed[0]


def test_overlapping_captures_in_threads_leave_the_process_streams_intact(capfd):
    # each thread's block ends while the other's is still open: saving and
    # restoring descriptors 1 and 2 per capture left the process writing into
    # a deleted temporary file (two estimates on a thread pool)
    before = (_fd_identity(1), _fd_identity(2), sys.stdout, sys.stderr)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    boxes: dict[str, list[str]] = {}

    def first() -> None:
        with captured_native_output() as box:
            first_in.set()
            second_in.wait(5)
            os.write(1, b"from the first\n")
        boxes["first"] = box
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with captured_native_output() as box:
            second_in.set()
            first_out.wait(5)
            os.write(1, b"from the second\n")
        boxes["second"] = box

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert "from the first" in boxes["first"][0]
    assert "from the second" in boxes["second"][0]
    assert (_fd_identity(1), _fd_identity(2), sys.stdout, sys.stderr) == before
    print("still printing")
    os.write(1, b"natively too\n")
    out = capfd.readouterr().out
    assert "still printing" in out and "natively too" in out
    assert "from the" not in out


def test_what_other_threads_print_is_not_swallowed(capfd):
    # item 13 of "Hard problems": while an estimate ran in one thread, the
    # progress lines another thread printed were captured with its native
    # output and dropped (4 of 9)
    inside, printed = threading.Event(), threading.Event()

    def progress() -> None:
        inside.wait(5)
        for k in range(3):
            print(f"progress {k}")
        printed.set()

    t = threading.Thread(target=progress)
    t.start()
    with captured_native_output() as box:
        inside.set()
        printed.wait(5)
        print("the estimate's own")
        os.write(1, b"native\n")
    t.join(5)
    out = capfd.readouterr().out
    assert all(f"progress {k}" in out for k in range(3))
    assert "progress" not in box[0]
    assert "the estimate's own" in box[0] and "native" in box[0]
    assert "the estimate's own" not in out and "native" not in out
