"""The self-contained build and the Debian package: ``python3 -m tools.build``.

Run from the checkout with any Python >= 3.11 that has venv; it needs nothing else from the
host but ``dpkg-deb`` (for the package; ``--no-deb`` skips it). Everything goes under
``build/package/`` (git-ignored):

- ``venv/``: PyInstaller and cronwrap's dependencies with the postgres extra, pinned by
  constraints.txt; made once and kept while pyproject.toml and constraints.txt are unchanged.
- ``dist/cronwrap/``: the self-contained build, PyInstaller's one-folder mode: the executable
  ``cronwrap`` beside ``_internal/`` (the interpreter, the standard library, cronwrap and its
  dependencies, their shared libraries). Copy the folder anywhere and run ``cronwrap`` in it: a
  host needs no Python, only a glibc at least as new as the build host's (printed at the end).
- ``cronwrap_VERSION-1_ARCH.deb``: that folder as /usr/lib/cronwrap, /usr/bin/cronwrap (a
  symlink), both man pages, the bash, fish and zsh completions, the systemd units of
  ``serve`` and ``watch``, and examples of the config under /usr/share/doc/cronwrap.

Why PyInstaller: it is the well-kept freezer whose one-folder output starts as fast as a
virtualenv (no unpacking at each start, unlike one-file mode or a zipapp with native wheels),
and its hooks (pyinstaller-hooks-contrib) know psycopg-binary's bundled libpq. Why dpkg-deb:
Debian's own builder, there wherever dpkg is; the package holds a prebuilt folder, so
debhelper's compiling and dh_python steps have nothing to do, and no debian/ source tree is
needed; fpm or nfpm would bring a Ruby or Go tool for the same tar of files.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"
MAINTAINER = "cronwrap maintainers <cronwrap@example.org>"

# Modules that cronwrap imports by name at run time (commands.py's import_module, the
# schedule package's lazy attributes) or that a dependency loads lazily (rich's Unicode width
# tables, by version): PyInstaller's analysis does not follow strings.
COLLECT_SUBMODULES = ["cronwrap", "rich._unicode_data"]
# readline is GPL-3 and only serves an interactive prompt, which cronwrap never shows;
# multiprocessing is never used, and its runtime hook would import it at every start (~14 ms).
EXCLUDE = ["readline", "multiprocessing", "tkinter", "pydoc", "pytest", "hypothesis", "mypy"]


def log(message: str) -> None:
    print(f"build: {message}", file=sys.stderr, flush=True)


def run(*args: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in args], check=True, **kwargs)  # type: ignore[call-overload]


def version() -> str:
    text = (ROOT / "cronwrap" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert found, "cronwrap/__init__.py has no __version__"
    return found.group(1)


def build_venv(out: Path, python: str) -> Path:
    """PyInstaller and the dependencies, made again only when the pins changed."""
    venv = out / "venv"
    pins = hashlib.sha256(b"".join((ROOT / name).read_bytes()
                                   for name in ("pyproject.toml", "constraints.txt"))).hexdigest()
    stamp = venv / "cronwrap-pins"
    if not (stamp.exists() and stamp.read_text() == pins):
        shutil.rmtree(venv, ignore_errors=True)
        log(f"making {venv}")
        run(python, "-m", "venv", venv)
        run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "-c", ROOT / "constraints.txt", f"{ROOT}[postgres,package]")
        stamp.write_text(pins)
    else:  # the dependencies are right; cronwrap itself is this checkout's, as it is now
        run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "--no-deps", "--force-reinstall", ROOT)
    return venv


SPEC = """\
# Written by tools/build.py for this build; not kept in the checkout.
from PyInstaller.utils.hooks import collect_data_files, collect_submodules

# tzdata: zoneinfo reads the host's /usr/share/zoneinfo first, then this package, so a host
# without Debian's tzdata still knows every zone
hiddenimports = ["tzdata"]
for name in {collect_submodules!r}:
    hiddenimports += collect_submodules(name)
datas = collect_data_files("cronwrap") + collect_data_files("tzdata")
# noarchive: the modules as .pyc files beside the interpreter, imported as a venv imports them,
# rather than zlib-compressed in one archive that each start reads and inflates module by
# module: 13 MiB more on disk (79 MiB), ~6 ms less CPU a firing (bench/results.md, package)
a = Analysis([{entry!r}], hiddenimports=hiddenimports, datas=datas, excludes={exclude!r},
             noarchive=True)
# Runtime hooks that each firing would pay for (issue 24 §1's budget): pyi_rth_inspect imports
# inspect (~15 ms) so that inspect can read frozen sources, pyi_rth_pkgutil imports pkgutil
# and zipfile (~18 ms) so that pkgutil.iter_modules sees the archive; cronwrap and its
# dependencies need neither (every command runs in tests/integration/test_package.py).
a.scripts = [s for s in a.scripts if s[0] not in {dropped!r}]
pyz = PYZ(a.pure)
exe = EXE(pyz, a.scripts, [], exclude_binaries=True, name="cronwrap", console=True, upx=False)
COLLECT(exe, a.binaries, a.datas, upx=False, name="cronwrap")
"""
DROPPED_RUNTIME_HOOKS = ("pyi_rth_inspect", "pyi_rth_pkgutil")


def freeze(venv: Path, out: Path) -> Path:
    """PyInstaller's one-folder build of the installed cronwrap, in out/dist/cronwrap."""
    dist = out / "dist"
    shutil.rmtree(dist / "cronwrap", ignore_errors=True)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    spec = work / "cronwrap.spec"
    spec.write_text(SPEC.format(collect_submodules=COLLECT_SUBMODULES,
                                entry=str(PACKAGING / "bin" / "cronwrap"), exclude=EXCLUDE,
                                dropped=DROPPED_RUNTIME_HOOKS))
    # from outside the checkout, so that the installed package is analysed, not ./cronwrap
    run(venv / "bin" / "pyinstaller", "--noconfirm", "--log-level", "WARN", "--distpath", dist,
        "--workpath", work, spec, cwd=out)
    return dist / "cronwrap"


def glibc_needed(bundle: Path) -> str:
    """The newest GLIBC_x.y symbol version any ELF file of the bundle asks for."""
    newest = (2, 0)
    for path in bundle.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as file:
                if file.read(4) != b"\x7fELF":
                    continue
                data = file.read()
            for major, minor in re.findall(rb"GLIBC_(\d+)\.(\d+)", data):
                newest = max(newest, (int(major), int(minor)))
    return f"{newest[0]}.{newest[1]}"


def gzipped(source: Path, target: Path) -> None:
    """gzip -9n, as Debian compresses man pages: no name, no time, the same bytes every build."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                 compresslevel=9, mtime=0) as out:
        out.write(source.read_bytes())


def placed(source: Path | bytes, target: Path, mode: int = 0o644) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source if isinstance(source, bytes) else source.read_bytes())
    target.chmod(mode)


def normalise(tree: Path) -> None:
    """Directories 0755, files 0755 when executable else 0644: nothing writable by others,
    whatever the umask and the wheels' own modes were."""
    for path in [tree, *tree.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(0o755 if path.is_dir() or mode & stat.S_IXUSR else 0o644)


def debian_package(bundle: Path, out: Path, maintainer: str, compression: str) -> Path:
    stage = out / "deb"
    shutil.rmtree(stage, ignore_errors=True)
    lib = stage / "usr" / "lib" / "cronwrap"
    shutil.copytree(bundle, lib, symlinks=True)
    (stage / "usr" / "bin").mkdir(parents=True)
    (stage / "usr" / "bin" / "cronwrap").symlink_to("../lib/cronwrap/cronwrap")
    share = stage / "usr" / "share"
    gzipped(ROOT / "man" / "cronwrap.1", share / "man" / "man1" / "cronwrap.1.gz")
    gzipped(ROOT / "man" / "cronwrap.toml.5", share / "man" / "man5" / "cronwrap.toml.5.gz")
    placed(ROOT / "completions" / "cronwrap", share / "bash-completion" / "completions" / "cronwrap")
    placed(ROOT / "completions" / "cronwrap.fish",
           share / "fish" / "vendor_completions.d" / "cronwrap.fish")
    zsh = subprocess.run([bundle / "cronwrap", "completion", "zsh"], check=True,
                         capture_output=True).stdout
    placed(zsh, share / "zsh" / "vendor-completions" / "_cronwrap")
    for unit in ("cronwrap-serve.service", "cronwrap-watch.service"):
        placed(PACKAGING / "systemd" / unit, stage / "usr" / "lib" / "systemd" / "system" / unit)
    doc = share / "doc" / "cronwrap"
    placed(PACKAGING / "deb" / "copyright", doc / "copyright")
    placed(PACKAGING / "examples" / "config.toml", doc / "examples" / "config.toml")
    placed(PACKAGING / "examples" / "default", doc / "examples" / "default")
    normalise(stage)

    control = stage / "DEBIAN"
    control.mkdir()
    for script in ("postinst", "prerm", "postrm"):
        placed(PACKAGING / "deb" / script, control / script, 0o755)
    sums = []
    size = 0
    for path in sorted(stage.rglob("*")):
        if path.is_relative_to(control) or path.is_dir():
            continue
        size += path.lstat().st_size
        if not path.is_symlink():
            sums.append(f"{hashlib.md5(path.read_bytes()).hexdigest()}  "
                        f"{path.relative_to(stage).as_posix()}\n")
    placed("".join(sums).encode(), control / "md5sums")
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True,
                          text=True).stdout.strip()
    fields = {"VERSION": f"{version()}-1", "ARCH": arch, "MAINTAINER": maintainer,
              "SIZE": str((size + 1023) // 1024),
              "DEPENDS": f"libc6 (>= {glibc_needed(bundle)})"}
    text = (PACKAGING / "deb" / "control.in").read_text()
    for key, value in fields.items():
        text = text.replace(f"@{key}@", value)
    placed(text.encode(), control / "control")
    deb = out / f"cronwrap_{fields['VERSION']}_{arch}.deb"
    run("dpkg-deb", "--root-owner-group", f"-Z{compression}", "--build", stage, deb,
        stdout=subprocess.DEVNULL)
    return deb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.build", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "package",
                        help="where everything goes (default: build/package)")
    parser.add_argument("--no-deb", action="store_true", help="only the self-contained build")
    parser.add_argument("--maintainer", default=MAINTAINER,
                        help=f"the package's Maintainer field (default: {MAINTAINER})")
    parser.add_argument("--compression", choices=("xz", "gzip"), default="xz",
                        help="of the package's data: xz (Debian's default, the smallest) or "
                        "gzip (three times faster to build; the tests use it)")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python (>= 3.11) to build with and bundle (default: this one)")
    options = parser.parse_args(argv)
    out = options.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    venv = build_venv(out, options.python)
    bundle = freeze(venv, out)
    log(f"self-contained build: {bundle} (needs glibc >= {glibc_needed(bundle)})")
    if not options.no_deb:
        deb = debian_package(bundle, out, options.maintainer, options.compression)
        log(f"Debian package: {deb}")
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
