"""Writing result files safely: checked before the work, atomic, never outside the folder.

The command line runs an estimation for seconds to minutes and then writes
``result.json`` and figures.  The rules (docs/reliability.md):

* :func:`check_output_folder` runs *before* the work: the folder (or its
  nearest existing parent) must be a writable directory, no file to be
  written may be a directory, and files of an earlier result are not
  replaced unless ``overwrite`` is set.  Nothing is created yet;
* :class:`AtomicOutputs` writes every file under a temporary name in the
  target folder and moves the finished set into place with
  :func:`os.replace` only when all were written, with Ctrl-C held off for
  those few renames; on any error or interrupt the temporary files are
  removed (and the folder, if it was created for them and is empty), so a
  folder holds either the old set or the new one, never a mix;
* :func:`safe_name` turns a model's name into one path component (a model
  named ``../../x`` writes to ``results/x``, not outside ``results/``);
* :func:`atomic_write_text` is the same for one text file.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from .interrupts import deferred_interrupt

__all__ = ["check_output_folder", "AtomicOutputs", "atomic_write_text", "safe_name"]


def _file_mode() -> int:
    """The mode a new file gets (0666 less the umask): temporary files are 0600."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _file_mode()


def safe_name(name: str, default: str = "model") -> str:
    """One safe path component from a name: letters, digits, ``.``, ``_`` and ``-``.

    Separators and other characters become ``_``; leading dots and
    underscores are dropped (no ``..``, no hidden folder).
    """
    out = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._")
    return out[:100] or default


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long, say: it cannot exist
        return False


def _nearest_existing(path: Path) -> Path:
    p = path
    while not _exists(p):
        if p.parent == p:
            break
        p = p.parent
    return p


def check_output_folder(folder: str | Path, names: Sequence[str], overwrite: bool = False,
                        option: str = "--out") -> Path:
    """Check, without creating anything, that ``names`` can be written into ``folder``.

    Parameters
    ----------
    folder : path
    names : sequence of str
        File names to be written (no separators).
    overwrite : bool
        Allow replacing files that already exist.
    option : str
        How the folder was given, for the messages.

    Returns
    -------
    Path
        The folder.

    Raises
    ------
    ValueError
        Naming the folder and what to do: it is a file, a parent is a
        file, it (or the parent that would hold it) is not writable, a
        name is taken by a directory, or earlier results would be replaced.
    """
    folder = Path(folder)
    if _exists(folder) and not folder.is_dir():
        raise ValueError(f"{option} {str(folder)!r} is a file, not a folder; give a folder")
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise ValueError(f"{option} {str(folder)!r}: {str(base)!r} is a file, so the folder "
                         "cannot be created; give another folder")
    what = "folder" if base == folder else f"parent folder {str(base)!r}"
    if not os.access(base, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {str(folder)!r}: the {what} is not writable (permission "
                         "denied); give a folder you can write to")
    try:  # os.access answers yes for root and on /proc; creating tells
        os.rmdir(tempfile.mkdtemp(prefix=".picard_casadi_probe_", dir=base))
    except OSError as err:
        raise ValueError(f"{option} {str(folder)!r}: nothing can be created in the {what} "
                         f"({err.strerror or err}); give a folder you can write to") from None
    for name in names:
        if os.sep in name or (os.altsep and os.altsep in name) or name in ("", ".", ".."):
            raise ValueError(f"output name {name!r} is not a plain file name")
    try:
        name_max = os.pathconf(base, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        name_max = 255
    p = folder
    while p != base and p.parent != p:
        if len(os.fsencode(p.name)) > name_max:
            raise ValueError(f"{option} {str(folder)!r}: the name {p.name[:40]!r}... is longer "
                             f"than the file system allows ({name_max} bytes)")
        p = p.parent
    if folder.is_dir():
        dirs = [n for n in names if (folder / n).is_dir()]
        if dirs:
            raise ValueError(f"{option} {str(folder)!r}: {', '.join(dirs)} exist(s) there as a "
                             "folder; remove it or give another folder")
        taken = [n for n in names if (folder / n).exists()]
        if taken and not overwrite:
            raise ValueError(
                f"{option} {str(folder)!r} already holds {', '.join(taken)} from an earlier "
                "run; pass --overwrite to replace them, or give another folder"
            )
    return folder


class AtomicOutputs:
    """Write a set of files into a folder all at once (see the module doc).

    Examples
    --------
    ::

        with AtomicOutputs(folder) as out:
            result.to_json(out.path("result.json"))
            fig.savefig(out.path("fit.png"), format="png")
            out.commit()            # all replaced at once; nothing before this
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._temps: dict[str, Path] = {}
        self._stale: list[str] = []
        self._created: list[Path] = []
        self.written: list[Path] = []

    def __enter__(self) -> AtomicOutputs:
        missing = []
        p = self.folder
        while not p.exists():
            missing.append(p)
            p = p.parent
        self.folder.mkdir(parents=True, exist_ok=True)
        self._created = missing  # innermost first
        return self

    def path(self, name: str) -> Path:
        """A temporary path in the folder where the file ``name`` is to be written."""
        if name in self._temps:
            return self._temps[name]
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=self.folder)
        os.close(fd)
        self._temps[name] = Path(tmp)
        return self._temps[name]

    def write_text(self, name: str, text: str) -> None:
        """Write ``text`` (UTF-8) as the file ``name``."""
        with open(self.path(name), "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def write_with(self, name: str, writer: Callable[[Path], object]) -> None:
        """Let ``writer(temporary_path)`` write the file ``name``."""
        writer(self.path(name))

    def remove(self, name: str) -> None:
        """Remove the file ``name`` of an earlier set at :meth:`commit` (if it is there).

        For a file the new set does not have (a profile figure of an earlier
        run): removed with the others' renames, so the folder never mixes sets.
        """
        self._stale.append(name)

    def commit(self) -> list[Path]:
        """Move every written file into place (Ctrl-C held off until done).

        Files marked with :meth:`remove` are removed first: if that fails,
        nothing has been replaced yet.
        """
        with deferred_interrupt():
            for name in self._stale:
                if name not in self._temps:
                    (self.folder / name).unlink(missing_ok=True)
            self._stale.clear()
            for name, tmp in self._temps.items():
                os.chmod(tmp, _MODE)
                os.replace(tmp, self.folder / name)
                self.written.append(self.folder / name)
            self._temps.clear()
        return self.written

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        with deferred_interrupt():  # a second Ctrl-C must not stop the clean-up
            for tmp in self._temps.values():
                try:
                    tmp.unlink()
                except OSError:
                    pass
            self._temps.clear()
            if exc_type is not None or not self.written:
                for d in self._created:  # innermost first; only if still empty
                    try:
                        d.rmdir()
                    except OSError:
                        break
        return False


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file beside it, then
    :func:`os.replace`; on any error (or Ctrl-C) the old file is untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _MODE)
        os.replace(tmp, path)
    except BaseException:
        with deferred_interrupt():
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
