"""Where the nvidia-pytriton wheel keeps tritonserver, its Python backend and its bundled libraries.

The same wheel serves the tests here and the production image, so both run the same server binary.
    python -m entrypoint.triton_install /opt/tritonserver/backends   # lay out the backend (image build)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path


class TritonInstallError(RuntimeError):
    """The wheel is missing or incomplete; the message names what is missing."""


@dataclass(frozen=True)
class TritonInstall:
    binary: Path
    backend_library: Path
    backend_utils: Path
    stub: Path
    libraries: Path

    @classmethod
    def find(cls) -> TritonInstall:
        spec = importlib.util.find_spec("pytriton")
        if spec is None or spec.origin is None:
            raise TritonInstallError("nvidia-pytriton is not installed in this Python environment")
        package = Path(spec.origin).parent
        server = package / "tritonserver"
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        install = cls(
            binary=server / "bin" / "tritonserver",
            backend_library=server / "backends" / "python" / "libtriton_python.so",
            backend_utils=server / "backends" / "python" / "triton_python_backend_utils.py",
            stub=server / "python_backend_stubs" / version / "triton_python_backend_stub",
            libraries=package.parent / "nvidia_pytriton.libs",
        )
        for path in (install.binary, install.backend_library, install.backend_utils, install.stub):
            if not path.exists():
                raise TritonInstallError(f"nvidia-pytriton wheel is missing {path}")
        return install

    def lay_out_backends(self, backends_dir: Path) -> Path:
        """Triton wants <backends>/python/{libtriton_python.so, stub, utils}; the wheel keeps them apart."""
        python_dir = backends_dir / "python"
        python_dir.mkdir(parents=True, exist_ok=True)
        for source in (self.backend_library, self.backend_utils, self.stub):
            target = python_dir / source.name
            if not target.exists():
                shutil.copy2(source, target)
        return backends_dir

    def loader_path(self, existing: str = "") -> str:
        """LD_LIBRARY_PATH: this Python's lib folder (else the stub may load another libpython) and the
        wheel's bundled libraries (else tritonserver hangs looking for a CUDA runtime)."""
        python_lib = sysconfig.get_config_var("LIBDIR") or ""
        return os.pathsep.join(part for part in (python_lib, str(self.libraries), existing) if part)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m entrypoint.triton_install BACKENDS_DIR", file=sys.stderr)
        return 2
    try:
        install = TritonInstall.find()
    except TritonInstallError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(install.lay_out_backends(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
