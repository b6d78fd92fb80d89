"""The ctypes table in binding.py against the engine's C declarations (engine/api.h): the same functions, the
same argument and return types, and a built library exporting exactly those functions."""
import ctypes
import re
import subprocess
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_uint8, c_uint32, c_uint64, c_void_p

from p4target import load
from p4target.backends.c import generate_c
from p4target.frontend import load_program
from p4target.native.binding import _SIGNATURES
from p4target.native.build import ENGINE, build

# Each C type and the ctypes types that pass it (bytes go in as c_char_p where Python hands a bytes object).
C_TYPES = {
    "void": {None}, "int": {c_int}, "u32": {c_uint32}, "u64": {c_uint64}, "int64_t": {c_int64},
    "double": {c_double}, "engine_t *": {c_void_p}, "u64 *": {POINTER(c_uint64)}, "u32 *": {POINTER(c_uint32)},
    "int *": {POINTER(c_int)}, "int64_t *": {POINTER(c_int64)}, "double *": {POINTER(c_double)},
    "u8 *": {POINTER(c_uint8), c_char_p},
    "char *": {c_char_p}, "void *": {c_void_p},
}
DECL = re.compile(r"ENG_API\s+([^;]*?)\b(eng_\w+)\(([^)]*)\);", re.S)


def _ctype(decl: str) -> set:
    """The ctypes types for one C type or parameter declaration ('const u64 *v' -> {POINTER(c_uint64)})."""
    text = decl.replace("const ", "").strip()
    base = text.split("*")[0].split()[0]
    return C_TYPES[base + " *" if "*" in text else base]


def header_signatures() -> dict[str, tuple[set, list[set]]]:
    text = (ENGINE / "api.h").read_text()
    out = {}
    for ret, name, params in DECL.findall(text):
        args = [] if params.strip() == "void" else [_ctype(p) for p in params.split(",")]
        out[name] = (_ctype(ret.strip()), args)
    return out


def test_the_ctypes_table_matches_the_header():
    declared = header_signatures()
    assert len(declared) > 30  # the parse found the declarations
    assert sorted(_SIGNATURES) == sorted(declared)
    for name, (restype, argtypes) in _SIGNATURES.items():
        want_ret, want_args = declared[name]
        assert restype in want_ret, f"{name}: returns {restype}, api.h says {want_ret}"
        assert len(argtypes) == len(want_args), f"{name}: {len(argtypes)} arguments, api.h has {len(want_args)}"
        for i, (got, want) in enumerate(zip(argtypes, want_args)):
            assert got in want, f"{name} argument {i}: {got}, api.h says {want}"


def test_the_checker_catches_a_wrong_type():
    assert _ctype("const u64 *v") == {POINTER(c_uint64)}
    assert _ctype("u32 port") == {c_uint32}
    assert c_uint32 not in _ctype("u64 index")  # a u32 passed for a u64 would be caught


def test_a_built_program_exports_exactly_the_api():
    with build(generate_c(load.lowered(load_program("p4src/aggnet.p4")).form).source) as lib:
        nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
        exported = {line.split()[-1] for line in nm.stdout.splitlines() if line.split()[-2:-1] == ["T"]}
        assert exported == set(_SIGNATURES)
        ctypes.CDLL(str(lib))  # and it loads: every symbol the engine needs is defined
