"""scripts/real_model_check.py builds llama.cpp portably and serves it with threads that do not starve.

The build itself takes 15-35 minutes and a model download, so it is not run here; what it is asked to build is.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "real_model_check.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_model_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cpu_that_reports_amx_and_avx512_gets_a_build_without_them(script: ModuleType, tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c avx512f amx_tile amx_int8 amx_bf16\n"
                    "processor\t: 1\nflags\t\t: fpu\n")
    flags = script.cpu_flags(info)
    assert {"avx2", "amx_tile", "avx512f"} <= flags and "fpu" in flags
    args = script.portable_cmake_args(flags).split()
    assert "-DGGML_NATIVE=OFF" in args
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF", "-DGGML_AVX512=OFF"} <= set(args)
    assert {"-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= set(args)
    assert not any(a.endswith("=ON") and ("AMX" in a or "AVX512" in a) for a in args)


def test_extensions_the_cpu_does_not_list_are_left_out(script: ModuleType, tmp_path: Path) -> None:
    args = set(script.portable_cmake_args(script.cpu_flags(tmp_path / "absent")).split())
    assert {"-DGGML_NATIVE=OFF", "-DGGML_AVX=OFF", "-DGGML_AVX2=OFF", "-DGGML_FMA=OFF", "-DGGML_F16C=OFF"} <= args


def test_the_server_waits_passively_on_one_thread_by_default(script: ModuleType) -> None:
    assert script.server_env({"PATH": "/bin"}) == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}
    import inspect

    assert inspect.signature(script.serve).parameters["threads"].default == 1
