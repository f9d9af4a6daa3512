"""llama.cpp's ``repack`` engine option (``--no-repack``), ``harness measure --engine-option`` and the crash
hint a failed point gets on a CPU where llama.cpp's AMX buffer is known to crash
(ggml-org/llama.cpp#20824)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from estimator.engines import get_engine
from harness import isolate
from harness.__main__ import _engine_options
from harness.hwdetect import CpuInfo, HostInfo
from harness.plan import PlanError, parse_plan, with_engine_options
from harness.sweep import with_crash_hint
from runners import llama_cpp as runner
from runners.base import PointSpec

PLAN = """
name = "two-engines"
prompt_lengths = [32]
gen_lengths = [8]
[[sweep]]
engines = ["llama.cpp"]
models = [{ id = "qwen3-0.6b", layers = 2 }]
quants = ["Q4_0"]
engine_options = { use_mmap = false }
[[sweep]]
engines = ["vllm"]
models = [{ id = "qwen3-0.6b", layers = 2 }]
quants = ["BF16"]
"""


def _host(isa: tuple[str, ...]) -> HostInfo:
    return HostInfo(
        host="vm",
        backend="CPU",
        device_name="Intel(R) Xeon(R) Processor",
        n_devices=1,
        driver="",
        hardware_id="",
        hardware_family="cpu-x86-avx512",
        cpu=CpuInfo("Intel(R) Xeon(R) Processor", "x86_64", 2, 2, 2**34, isa, "cpu-x86-avx512"),
    )


def _ended(returncode: int, timed_out: bool = False) -> str:
    """The error text a sweep gets from a child that ended so (harness.isolate.ChildResult.describe)."""
    child = isolate.ChildResult((), returncode, timed_out, 1.0, "", "ggml_backend_amx_mul_mat", 10.0)
    return child.describe()


SEGV = _ended(-11)


def test_engine_option_arguments_read_as_toml_values():
    assert _engine_options(["llama.cpp:repack=false", "vllm:max_num_seqs=8", "vllm:dtype=bfloat16"]) == {
        "llama.cpp": {"repack": False},
        "vllm": {"max_num_seqs": 8, "dtype": "bfloat16"},
    }
    for bad in ("llama.cpp", "llama.cpp:repack", "repack=false", ":repack=false", "llama.cpp:=1"):
        with pytest.raises(PlanError, match="ENGINE:KEY=VALUE"):
            _engine_options([bad])


def test_with_engine_options_adds_to_that_engines_points_only_and_changes_their_keys():
    plan = parse_plan(PLAN, Path("plans/two.toml"))
    out = with_engine_options(plan, "llama.cpp", {"repack": False})
    by_engine = {p.engine: p for p in out.points}
    assert by_engine["llama.cpp"].spec.engine_options == {"use_mmap": False, "repack": False}
    assert by_engine["vllm"].spec.engine_options == {}
    old, new = plan.points[0], out.points[0]
    assert old.key_body("f") != new.key_body("f")  # a point measured another way is another point
    assert out.sha256 == plan.sha256 and out.name == plan.name


@pytest.mark.parametrize(
    ("engine", "options", "message"),
    [
        ("llama.cpp", {"repak": False}, "nearest: repack"),
        ("llama.cpp", {"repack": 1}, "expected bool"),
        ("llama.cp", {"repack": False}, "unknown engine"),
        ("sglang", {}, "unknown engine"),
    ],
)
def test_with_engine_options_rejects_what_the_plan_would(engine, options, message):
    plan = parse_plan(PLAN, Path("plans/two.toml"))
    with pytest.raises(PlanError, match=message):
        with_engine_options(plan, engine, options)


def test_the_llama_cpp_profile_names_the_amx_workaround_where_it_applies():
    profile = get_engine("llama.cpp")
    hint = profile.crash_hint(("amx", "avx512"), {})
    assert "20824" in hint and "repack = false" in hint and "llama.cpp:repack=false" in hint
    assert profile.crash_hint(("amx", "avx512"), {"repack": False}) == ""  # already measured without it
    assert profile.crash_hint(("avx512", "avx512_bf16"), {}) == ""  # a CPU without AMX: another crash
    assert get_engine("vllm").crash_hint(("amx",), {}) == ""


def test_a_crashed_point_on_an_amx_host_says_what_to_try():
    spec = PointSpec(model_path="m.gguf", n_ctx=512)
    out = with_crash_hint(SEGV, "llama.cpp", _host(("amx", "avx512")), spec)
    head, hint, rest = out.split("\n", 2)
    assert head == SEGV.split("\n")[0] and head.startswith("crashed: killed by SIGSEGV")
    assert hint.startswith("hint: ")
    assert rest == "--- stderr tail ---\nggml_backend_amx_mul_mat"  # the child's own words are kept
    # no hint: another host, the option already set, an OOM kill, a timeout, another engine
    assert with_crash_hint(SEGV, "llama.cpp", _host(("avx512",)), spec) == SEGV
    no_repack = PointSpec(model_path="m.gguf", n_ctx=512, engine_options={"repack": False})
    assert with_crash_hint(SEGV, "llama.cpp", _host(("amx",)), no_repack) == SEGV
    for error in (_ended(-9), _ended(-15, timed_out=True)):  # the OOM killer's SIGKILL, a timeout
        assert with_crash_hint(error, "llama.cpp", _host(("amx",)), spec) == error
    assert with_crash_hint(SEGV, "vllm", _host(("amx",)), spec) == SEGV


class _Params:
    _fields_ = [("n_gpu_layers", int), ("use_extra_bufts", bool)]

    def __init__(self) -> None:
        self.use_extra_bufts = True


def _fake_llama_cpp(params: type = _Params) -> types.SimpleNamespace:
    bindings = types.SimpleNamespace(llama_model_params=params, llama_model_default_params=params)
    return types.SimpleNamespace(__version__="0.3.36", llama_cpp=bindings, llama_model_params=params)


def test_no_repack_sets_use_extra_bufts_while_the_model_loads_and_restores_after():
    fake = _fake_llama_cpp()
    original = fake.llama_cpp.llama_model_default_params
    with runner._model_params_default(fake, use_extra_bufts=False):
        assert fake.llama_cpp.llama_model_default_params().use_extra_bufts is False
    assert fake.llama_cpp.llama_model_default_params is original
    with runner._model_params_default(fake, use_extra_bufts=True):  # llama.cpp's default: nothing changes
        assert fake.llama_cpp.llama_model_default_params is original
    with pytest.raises(ValueError), runner._model_params_default(fake, use_extra_bufts=False):
        raise ValueError("a failed load")
    assert fake.llama_cpp.llama_model_default_params is original  # restored after an error too
    assert runner._repack({}) is True and runner._repack({"repack": False}) is False


def test_a_library_without_the_field_is_an_error_not_a_silent_default():
    class Old:
        _fields_ = [("n_gpu_layers", int)]

    with pytest.raises(RuntimeError, match="no llama_model_params.use_extra_bufts"):
        with runner._model_params_default(_fake_llama_cpp(Old), use_extra_bufts=False):
            pass


def test_the_installed_llama_cpp_python_has_the_field():
    llama_cpp = pytest.importorskip("llama_cpp", reason="no llama-cpp-python here (make install-llama)")
    with runner._model_params_default(llama_cpp, use_extra_bufts=False):
        assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is False
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True


class _Llama:
    """A stand-in for the llama_cpp module: its version and system info."""

    def __init__(self, info: str) -> None:
        self.__version__ = "0.3.36"
        self._info = info

    def llama_print_system_info(self) -> bytes:
        return self._info.encode()


AMX_INFO = "CPU : AVX512 = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | OPENMP = 1 | REPACK = 1 |"


def test_the_amx_check_runs_only_on_a_build_with_the_amx_buffer(tmp_path, monkeypatch):
    from runners import amx_check

    monkeypatch.setenv("FITBENCH_CACHE", str(tmp_path))
    calls = []
    no_amx = _Llama("CPU : AVX512 = 1 | REPACK = 1 |")
    assert amx_check.amx_buffer_crashes(no_amx, "m.gguf", 2, check=lambda *a: calls.append(a)) == (False, "")
    assert calls == [] and not list(tmp_path.iterdir())


def test_a_crash_is_remembered_for_the_machine_and_a_model_that_ran_by_its_file(tmp_path, monkeypatch):
    from runners import amx_check

    monkeypatch.setenv("FITBENCH_CACHE", str(tmp_path))
    llama = _Llama(AMX_INFO)
    a, b = tmp_path / "a-L4-F16.gguf", tmp_path / "b-L2-Q8_0.gguf"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 20)
    calls = []

    def check(path, threads, answers={str(a): False, str(b): True}):  # noqa: B006
        calls.append(path)
        return answers[path]

    assert amx_check.amx_buffer_crashes(llama, str(a), 2, check=check) == (False, "")
    assert amx_check.amx_buffer_crashes(llama, str(a), 2, check=check) == (False, "")  # remembered: ran
    assert calls == [str(a)]
    crashes, why = amx_check.amx_buffer_crashes(llama, str(b), 2, check=check)
    assert crashes and "20824" in why and "b-L2-Q8_0.gguf" in why and "--no-repack" in why
    assert amx_check.amx_buffer_crashes(llama, str(a), 2, check=check)[0]  # the machine's, for every model
    assert calls == [str(a), str(b)]
    # another build or machine is another key; an inconclusive check is not remembered
    other = _Llama(AMX_INFO + " LLAMAFILE = 1 |")
    assert amx_check.amx_buffer_crashes(other, str(b), 2, check=lambda *_: None) == (False, "")
    assert amx_check.amx_buffer_crashes(other, str(b), 2, check=lambda *_: True)[0]


def test_the_check_child_tells_a_crash_from_a_failure(tmp_path, monkeypatch):
    """run_check's child: a crash signal is True, exit 0 False, an ordinary failure None."""
    import subprocess

    from runners import amx_check

    def fake_run(code):
        return lambda *a, **k: subprocess.CompletedProcess(a[0], code, b"", b"")

    for code, answer in ((0, False), (-11, True), (-6, True), (1, None), (-9, None)):
        monkeypatch.setattr(subprocess, "run", fake_run(code))
        assert amx_check.run_check(str(tmp_path / "m.gguf"), 2) is answer, code


def test_two_builds_of_one_version_are_checked_apart(tmp_path, monkeypatch):
    """The check's key holds a hash of the build's ggml CPU library: a rebuild of the same version (say with
    tools/amx_header_fix.py) is checked again instead of inheriting the older build's crash."""
    import types

    from runners import amx_check

    monkeypatch.setenv("FITBENCH_CACHE", str(tmp_path / "cache"))
    builds = []
    for n, lib in enumerate((b"stock build", b"fixed build")):
        pkg = tmp_path / f"site{n}" / "llama_cpp"
        (pkg / "lib").mkdir(parents=True)
        (pkg / "lib" / "libggml-cpu.so").write_bytes(lib)
        fake = _Llama(AMX_INFO)
        mod = types.SimpleNamespace(__version__=fake.__version__, __file__=str(pkg / "__init__.py"),
                                    llama_print_system_info=fake.llama_print_system_info)  # fmt: skip
        builds.append(mod)
    ids = [amx_check.build_id(b) for b in builds]
    assert all(len(i) == 16 for i in ids) and ids[0] != ids[1]
    assert amx_check.build_id(_Llama(AMX_INFO)) == ""  # no __file__: the key as before
    model = tmp_path / "m-L4-Q8_0.gguf"
    model.write_bytes(b"m")
    assert amx_check.amx_buffer_crashes(builds[0], str(model), 2, check=lambda *_: True)[0]
    calls = []
    answer = amx_check.amx_buffer_crashes(builds[1], str(model), 2, check=lambda *a: calls.append(a) or False)
    assert answer == (False, "")
    assert len(calls) == 1
