"""The grader's integrity check: what a rung's compiled objects may contain, define and import.

It reads the stage's objects (BUILD/CMakeFiles/stage_NN.dir/**/*.o) with readelf, c++filt and
cuobjdump, never the source text, so a macro, a renamed include or a string split in two changes
nothing. The rules, kept in one place (the constants under "the rules" below; docs/assignments.md,
"Integrity", explains them):

 1. forbidden names. No symbol of the objects names the CPU oracle or the input generator,
    cuBLAS, cuDNN, CUTLASS, CUB, Thrust, PyTorch (ATen, c10), or a process or loader escape
    (dlopen, dlsym, system, popen, fork, exec*, posix_spawn, syscall): not the host symbols they
    call (undefined), not those they define (external or internal), not the device code's
    symbols (cuobjdump -symbols: kernels and device functions that were not inlined, and the
    namespace-scope objects that CUB's headers define).
 2. allow-list. Every host symbol defined with external linkage (GLOBAL, WEAK or UNIQUE) is
      a. the rung's registration function, ladder::stage_NN_descriptor();
      b. in an anonymous namespace: nvcc gives those external linkage (the kernels' host stubs
         __device_stub__ZN6ladder..._GLOBAL__N__... too); their names hold a hash of the
         translation unit, so no other object can refer to them;
      c. weak (or unique) in std::, __gnu_cxx:: or cuda::std::: template and inline
         instantiations of the standard libraries;
      d. what LADDER_REGISTER_STAGE itself instantiates (StageDescriptor's destructor) and the
         compiler's DW.ref.__gxx_personality_v0;
      e. weak (or unique), and defined weak (or unique) by the reference build as well: the
         reference solution's object of the same rung (reference_stage_NN, official runs) and the
         ladder libraries, nvcc's per-file anonymous-namespace names made equal. A weak definition of what the libraries define strongly is not
         allowed: the linker could keep it in place of theirs.
    Anything else (cudaEventElapsedTime, a ladder:: function outside the anonymous namespace, an
    explicit specialization in std::) fails, by name.
 3. static constructors. Every entry of .init_array, .ctors and .preinit_array is nvcc's own
    kernel registration, __sti____cudaRegisterAll (whole-program compilation, as this build
    does); nothing is in .fini_array or .dtors, there is no .init or .fini code and no IFUNC
    (its resolver runs at load time). So no __attribute__((constructor)) function and no global
    with a dynamic initializer (g++'s _GLOBAL__sub_I_*) runs before main or after it.
 4. imports. Every host symbol the objects call or use without defining it (undefined) is on an
    allow-list derived from what the instructor's rung objects import: the CUDA runtime (cuda*,
    nvcc's __cuda* registration), the C++ runtime (operator new and delete, __cxa_*, _Unwind_*,
    the personality routine, std::, __gnu_cxx:: and __cxxabiv1:: functions), a small set of C and
    math functions (memcpy, strlen, the printf family, malloc, expf, ...; IMPORT_ALLOWED) and the
    course library's helpers a rung may call (problem shapes, error text, device limits, blocks_for,
    the tracks' geometry, the tensor map encoder, which does the driver lookup a rung may not;
    LIBRARY_ALLOWED). Refused by name, with the reason (IMPORT_DENIED,
    IMPORT_STD_DENIED, LIBRARY_DENIED): the dynamic loader (dl_iterate_phdr, getauxval, ...) and
    driver entry points (cudaGetDriverEntryPoint, cuGetProcAddress, the driver API, cudaLibrary*),
    process escapes, files and descriptors (fopen, open, readlink, std::ifstream,
    std::filesystem), the environment (getenv, setenv), memory mapping (mmap, mprotect), signals,
    code at exit or an early exit (atexit outside nvcc's registration, exit), host threads
    (pthread_create, std::thread, OpenMP), and the library's oracles, input generator,
    tolerances, checkers, timing (GpuSession, time_*) and other rungs' registrations. Anything
    else fails as outside the allow-list. A name rule 1 already refuses is not repeated.

What the rules cannot see (docs/assignments.md, "Integrity"): code that reaches a function
without importing it (an address computed from another one, inline assembly: a syscall
instruction), what the program does with memory at run time, and a solution copied into the
rung's own source. The libraries a program really maps are checked at run time, rule 5, by
loaded_libraries.py (an LD_AUDIT library); a library mapped by hand with mmap, without the
loader, is stopped only by rule 4 refusing mmap, mprotect and open.

A rung of a second track (TRACK-NN, tracks/TRACK_name/rungs/NN_name/; check_track) is held to
the same rules on its one object in the track's library: its registration is
ladder::TRACK::rung_NN(), rule 1 adds the track's oracle, input generator and checker
(TRACK_FORBIDDEN; those of the tracks it builds on, its "needs" in grader/rungs.json, too) and
every other rung of the track, and rule 2e compares with the track library's other objects, the
ladder libraries and the track's host library.

Run alone: python3 -m grader.integrity BUILD NN  (prints the findings, exits 1 on any).
"""
import glob
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

from tooling.checks.sass import find_cuobjdump  # check_sass.sh's lookup, shared with the technique check

# ---- the rules ------------------------------------------------------------------------------

# Rule 1: (pattern searched in a demangled name, what it names).
FORBIDDEN = [
    (r"(?<!\w)ladder::(conv_transpose2d_literal|global_average_pool|bias_logsumexp_scale|literal_pipeline|"
     r"linearity_pipeline|make_inputs)\b", "the CPU oracle or the input generator"),
    (r"(?<!\w)(cublas|cudnn)\w*", "cuBLAS or cuDNN, a CUDA math library"),
    (r"(?<!\w)(cutlass|cute)::", "CUTLASS, a CUDA math library"),
    (r"(?<!\w)cub::", "CUB, a library that would do the rung's work"),
    (r"(?<!\w)thrust::", "Thrust, a library that would do the rung's work"),
    (r"(?<!\w)(at|c10|torch|caffe2)::", "PyTorch (ATen, c10), a library that would do the rung's work"),
    (r"^(dlopen|dlmopen|dlsym|dlvsym|system|popen|fork|vfork|clone|clone3|execl|execle|execlp|execv|execve|"
     r"execveat|execvp|execvpe|fexecve|posix_spawn|posix_spawnp|syscall)(@.*)?$", "a process or loader escape"),
]
# Rule 1 for a track's rungs, by track: what would compute or check the answer. A track's rungs
# are held to the rules of the tracks it builds on as well (forbidden's `needs`).
TRACK_FORBIDDEN = {
    "p38": [(r"(?<!\w)ladder::p38::(reference|make_inputs|avg_pool3d|conv_transpose3d|softmax_scale|row_case|"
             r"check_rows|run_rung_once|run_track|compare|output_tolerance|z_error_bound)\b",
             "the track's fp64 oracle, input generator or checker")],
    # Problem 74's oracles (forward, backward), inputs, tolerances and checks, and the runner's
    # helpers that run a rung (its host library builds on problem 38's: "needs" in rungs.json).
    "p74": [(r"(?<!\w)ladder::p74::(make_inputs|make_grad_out|exact_check|forward|backward|saved_from|argmax_position|"
             r"forward_tolerance|check_forward|grad_tolerance|check_grads|check_forward_samples|run_track|"
             r"run_forward_once|run_backward_once|backward_macs|samples_to_check|bitwise_equal)\b(?!::)",
             "the track's fp64 oracle, input generator or checker")],
}
# Rule 2c: the scopes whose weak instantiations any object may carry.
STANDARD_SCOPES = (("std",), ("__gnu_cxx",), ("cuda", "std"))
# Rule 2d: what the registration macro and the compiler put in every stage object.
REGISTRATION_FOOTPRINT = {"_ZN6ladder15StageDescriptorD1Ev", "_ZN6ladder15StageDescriptorD2Ev",
                          "DW.ref.__gxx_personality_v0"}
# Rule 2e: the reference build's objects, by CMake target folder (NN: the rung).
REFERENCE_TARGETS = ("grader/CMakeFiles/reference_stage_{id}.dir", "CMakeFiles/ladder_common.dir",
                     "CMakeFiles/ladder_runner.dir", "CMakeFiles/ladder_main.dir")
# Rule 3: nvcc's registration, which its generated stub file declares as
# static void __sti____cudaRegisterAll(void) __attribute__((__constructor__)).
NVCC_REGISTRATION = "_ZL24__sti____cudaRegisterAllv"
CONSTRUCTOR_SECTIONS = re.compile(r"^\.(init_array|ctors)(\.\d+)?$")
STARTUP_SECTIONS = re.compile(r"^\.(init_array|ctors|preinit_array|fini_array|dtors)(\..*)?$")
STARTUP_TYPES = {"INIT_ARRAY", "PREINIT_ARRAY", "FINI_ARRAY"}
STARTUP_CODE = {".init", ".fini"}

# Rule 4: what a rung's objects may import (their undefined host symbols). Derived from what the
# instructor's rung objects import (stages 01-13, rungs p38-01..07 and p74-01..09), generalized to
# the libraries behind them. A name is judged by the first list that matches: IMPORT_DENIED (with
# its reason), then the allow-lists; anything else is refused as outside the allow-list.
IMPORT_DENIED = [
    (r"dl\w*|_dl_\w+|__libc_(?!single_threaded$)\w+|getauxval|_r_debug|cuda(GetDriverEntryPoint\w*)|cuGetProcAddress\w*",
     "the dynamic loader or a driver entry point (code the build did not link)"),
    (r"cudaLibrary\w+|cu[A-Z]\w*", "the CUDA driver API or a runtime library loader (device code that is not the rung's source)"),
    (r"system|popen|fork|vfork|clone3?|exec\w*|fexecve|posix_spawnp?|syscall|ptrace|prctl|kill|tgkill|pidfd_\w+",
     "a process escape"),
    (r"(__)?(open|openat|creat|fopen|freopen|fdopen|opendir|readlink|readlinkat|realpath|access|faccessat|stat|fstat|lstat|"
     r"statx|__xstat|__fxstat|__lxstat|unlink|rename|mkdir|read|pread|write|pwrite|close|dup[23]?|fcntl|ioctl|"
     r"socket|connect|sendfile|splice|inotify_\w+)(64)?(_2)?",
     "file or descriptor access (the hidden problems, the reference's answers, the grader's channels)"),
    (r"getenv|secure_getenv|setenv|unsetenv|putenv|clearenv|environ|__environ",
     "the environment (the grader's settings)"),
    (r"mmap(64)?|munmap|mremap|mprotect|pkey_\w+|memfd_create|shm_open|shmat|process_vm_\w+|madvise",
     "memory mapping or protection (code loaded or patched by hand)"),
    (r"signal|sigaction|__sysv_signal|bsd_signal|sigaltstack|sigprocmask|raise|alarm|setitimer|timer_create",
     "a signal handler or signal"),
    (r"atexit|on_exit|at_quick_exit|exit|_exit|_Exit|quick_exit",
     "code at exit, or an early exit (the runner's checks would not run)"),
    (r"pthread_create|GOMP_\w+|omp_\w+|thrd_create", "a host thread, which runs beside the rung's timed work"),
]
# C and runtime names a rung may import (regex, full match): the CUDA runtime and nvcc's
# registration, the C++ runtime (exceptions, unwinding, guards of function-local statics, the
# libstdc++ helpers that headers call), and the C and math library functions code commonly uses.
IMPORT_ALLOWED = [
    r"cuda[A-Z]\w*|__cuda\w+",
    r"__cxa_\w+|_Unwind_\w+|__gxx_personality_v0|__dso_handle|_GLOBAL_OFFSET_TABLE_|__tls_get_addr|__libc_single_threaded|"
    r"__once_proxy|__pthread_key_create|pthread_(once|mutex_\w+|cond_\w+|key_create|getspecific|setspecific|self|equal)",
    r"(__)?(memcpy|memmove|memset|memcmp|memchr|strlen|strnlen|strcmp|strncmp|strchr|strrchr|strstr|strcpy|strncpy|"
    r"strcat|strncat|printf|fprintf|sprintf|snprintf|vprintf|vfprintf|vsprintf|vsnprintf|puts|fputs|putchar|fputc|putc|"
    r"fwrite|fflush)(_chk)?",
    r"stdout|stderr|__stack_chk_fail|__stack_chk_guard|abort|__assert_fail|__errno_location|malloc|calloc|realloc|free|"
    r"posix_memalign|aligned_alloc|qsort|abs|labs|llabs|(__isoc23_)?strto(l|ul|ll|ull|f|d|ld)|clock_gettime|"
    r"gettimeofday|clock|time",
    r"__[a-z]+[sdtxhb][ifc][234]|__(float|fix)\w+|__(extend|trunc)\w+[23]",  # libgcc's arithmetic (__int128, popcount)
    r"(__)?(a?(sin|cos|tan)h?|atan2|sincos|exp|exp2|exp10|expm1|log|log2|log10|log1p|pow|sqrt|cbrt|hypot|fabs|floor|ceil|"
    r"round|lround|llround|trunc|rint|lrint|llrint|nearbyint|fmod|remainder|remquo|fma|fmax|fmin|fdim|frexp|ldexp|"
    r"scalbn|modf|copysign|nextafter|erf|erfc|tgamma|lgamma|ilogb|logb)[fl]?(_finite)?",
]
# C++ scopes whose functions (libstdc++ and the C++ ABI) a rung may import, but for IMPORT_STD_DENIED.
IMPORT_STD_SCOPES = ("std", "__gnu_cxx", "__cxxabiv1")
IMPORT_STD_DENIED = [
    (r"std::(__cxx11::)?basic_(i|o)?fstream|std::basic_filebuf|std::(__fs::)?filesystem::",
     "file access (the hidden problems, the reference's answers)"),
    (r"std::thread\b|std::jthread\b", "a host thread, which runs beside the rung's timed work"),
    (r"std::set_terminate|std::set_unexpected", "code at exit, or an early exit (the runner's checks would not run)"),
]
# The course library (ladder::, qualified names with their classes, regex, full match): first what
# a rung must not call, with the reason; then what it may call. The references call
# throw_cuda_error, blocks_for, shared_memory_per_block_limit, valid_input_range,
# encode_tensor_map_f32 (stage 17: the driver's tensor map encoder, whose entry point the library
# looks up so that no rung imports the lookup), the problems' own methods, p38's make_geometry, clamp_lo, clamp_hi and pool_divisor, p74's make_geometry,
# grid_for and kernelbench_family_mismatch; the rest of the list is their siblings in the same
# headers (problem shapes, error text, device limits) and the types a rung is handed or throws,
# which compute nothing the rung must.
LIBRARY_DENIED = [
    (r"ladder::(\w+::)?(make_inputs|make_grad_out|standard_normal|generate_pool_tensor|exact_\w+|check_exact_inputs)",
     "the input generator"),
    (r"ladder::(\w+::)?(\w*reference\w*|conv_transpose2d_literal|global_average_pool|bias_logsumexp_scale|"
     r"literal_pipeline|linearity_pipeline|avg_pool3d|conv_transpose3d|softmax_scale|forward|backward|saved_from|"
     r"argmax_position|row_case|rows_to_check)", "a CPU oracle"),
    (r"ladder::(\w+::)?(\w*tolerance|fp32_chain_length|z_chain_length|z_error_bound|compare|check_\w+|"
     r"(Agreement|GradCheck|ForwardCheck)(::\w+)?|bitwise_equal|samples_to_check)", "a tolerance, comparison or checker"),
    (r"ladder::(\w+::)?(GpuSession|L2Flush)(::\w+)?|ladder::(\w+::)?(time_\w+|median|spread_of|\w*cub\w*|\w*thrust\w*)",
     "the runner's timing or a CUB wrapper"),
    (r"ladder::(\w+::)?stage_\d+_descriptor|ladder::(\w+::)?(rung_\d+|rungs|find_rung)", "another rung's registration (its kernels)"),
]
LIBRARY_ALLOWED = [
    r"ladder::(throw_cuda_error|cuda_error_hint|cuda_error_text|is_sticky_cuda_error|sticky_cuda_error|"
    r"cuda_device_available|shared_memory_per_block_limit|device_allocate|format_bytes|blocks_for|valid_input_range|"
    r"encode_tensor_map_f32|"
    r"to_string|cost_of|(Problem|StageDescriptor|PhaseMarks|GpuStageArgs|PoolArgs|DeviceInputs|DeviceBuffer|"
    r"CudaError|DeviceMemoryError|InvalidProblem|ConvParams|TapRange|Tf32Split)(::\w+)?)",
    r"ladder::(p38|p74)::(Rung|RungArgs|PhaseMarks|DeviceInputs|Geometry|InvalidProblem)(::\w+)?",
    r"ladder::p38::(Problem38(::\w+)?|Triple::str|to_string|checked_mul|conv_transpose_out_size|validate_conv_transpose3d|"
    r"pool_out_size|make_geometry|pool_divisor|clamp_lo|clamp_hi|clamp_value|taps_per_position)",
    r"ladder::p74::(Problem74(::\w+)?|max_pool_out_size|make_geometry|grid_for|kernelbench_family_mismatch|slope)",
    r"ladder::tracks::(Triple::str|to_string|checked_mul|conv_transpose_out_size|validate_conv_transpose3d|"
    r"InvalidProblem(::\w+)?)",  # tracks/shared (its Agreement and compare are a checker: rule 1)
]
OUTSIDE_IMPORTS = "outside the rung's import allow-list"

# Rule 5 is checked at run time, not here: the libraries a plain run maps (loaded_libraries.py).
RULE_NAMES = {1: "forbidden names", 2: "allow-list", 3: "static constructors", 4: "imports", 5: "loaded libraries"}
EXTERNAL = {"GLOBAL", "WEAK", "UNIQUE", "GNU_UNIQUE"}
WEAK = {"WEAK", "UNIQUE", "GNU_UNIQUE"}
MAX_LINES = 12  # findings listed in a report; the rest are counted
FAIL = "FAIL: integrity"  # how a failing line starts (selftest looks for it)


class IntegrityError(ValueError):
    """A tool the check needs is missing or failed; the message says which. (A ValueError, so
    scripts/assignment.py stops with the message rather than a traceback: a grader that cannot
    read the objects must not pass or fail them.)"""


# ---- reading objects -----------------------------------------------------------------------

@dataclass
class Symbol:
    num: int
    value: int
    type: str   # FUNC, OBJECT, NOTYPE, SECTION, FILE, ...
    bind: str   # LOCAL, GLOBAL, WEAK, UNIQUE
    ndx: str    # section index, UND, ABS or COM
    name: str
    size: int = 0

    @property
    def defined(self):
        return self.ndx != "UND"


@dataclass
class Section:
    index: int
    name: str
    type: str
    size: int
    entsize: int


@dataclass
class Reloc:
    offset: int
    sym: int     # symbol index, 0: none
    type: str
    addend: int


# Num: Value Size Type Bind Vis [other] Ndx Name; the name may be empty.
SYMBOL_LINE = re.compile(r"^\s*(\d+):\s+([0-9a-fA-F]+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s+\[[^\]]*\])?\s+(\S+)"
                         r"(?:[ \t]+(.*))?$")
# [Nr] Name Type Address Off Size ES ...; the name is empty for section 0.
SECTION_LINE = re.compile(r"^\s*\[\s*(\d+)\]\s+(?:(\S+)\s+)?([A-Z][A-Z0-9_]*)\s+([0-9a-fA-F]{8,})\s+[0-9a-fA-F]+\s+"
                          r"([0-9a-fA-F]+)\s+([0-9a-fA-F]+)")
RELOC_HEAD = re.compile(r"^Relocation section '([^']+)'")
RELOC_LINE = re.compile(r"^([0-9a-fA-F]+)\s+([0-9a-fA-F]+)\s+(\S+)(.*)$")


def parse_symbols(text):
    """readelf -sW output -> [Symbol] (the first symbol table: an object file has one)."""
    out = []
    for line in text.splitlines():
        if line.startswith("Symbol table") and out:
            break
        m = SYMBOL_LINE.match(line)
        if m:
            num, value, size, typ, bind, _vis, ndx, name = m.groups()
            size = int(size, 16) if size.lower().startswith("0x") else int(size)
            out.append(Symbol(int(num), int(value, 16), typ, bind, ndx, (name or "").strip(), size))
    return out


def parse_sections(text):
    """readelf -SW output -> [Section]."""
    return [Section(int(m.group(1)), m.group(2) or "", m.group(3), int(m.group(5), 16), int(m.group(6), 16))
            for m in map(SECTION_LINE.match, text.splitlines()) if m]


def parse_relocations(text):
    """readelf -rW output -> {relocated section name: [Reloc]} (.rela.X and .rel.X give X)."""
    out, current = {}, None
    for line in text.splitlines():
        head = RELOC_HEAD.match(line)
        if head:
            current = re.sub(r"^\.rela?(?=\.)", "", head.group(1))
            out.setdefault(current, [])
            continue
        m = RELOC_LINE.match(line.strip())
        if not (current and m):
            continue
        offset, info, typ, rest = m.groups()
        # ELF64 packs the symbol index in the high 32 bits of r_info, ELF32 in the high 24.
        sym = int(info, 16) >> (32 if len(info) > 8 else 8)
        sign = re.search(r"([+-])\s*([0-9a-fA-F]+)\s*$", rest)
        if sign:
            addend = int(sign.group(2), 16) * (-1 if sign.group(1) == "-" else 1)
        else:
            words = rest.split()
            addend = int(words[-1], 16) if words and re.fullmatch(r"[0-9a-fA-F]+", words[-1]) else 0
        out[current].append(Reloc(int(offset, 16), sym, typ, addend))
    return out


# TYPE BIND VISIBILITY SECTION [U] NAME; U marks an undefined symbol, and the name may be empty.
DEVICE_LINE = re.compile(r"^(FUNC|OBJECT|NOTYPE|TLS|COMMON)\s+(LOCAL|GLOBAL|WEAK)\s+\S+\s+\S+\s+(?:U\s+)?(\S*)\s*$")


def parse_device_symbols(text):
    """cuobjdump -symbols output -> [(bind, name)] over every cubin of the object."""
    return [(m.group(2), m.group(3)) for m in map(DEVICE_LINE.match, text.splitlines()) if m and m.group(3)]


def tool(cmd, what, stdin=None):
    """The finished process (subprocess.CompletedProcess, text output) of cmd; IntegrityError
    naming `what` if the program cannot be run."""
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    except FileNotFoundError:
        raise IntegrityError(f"{cmd[0]} not found: the integrity check needs {what}") from None


def readelf(obj, flag):
    """readelf -W FLAG OBJ's output; IntegrityError if readelf is missing or fails."""
    p = tool(["readelf", "-W", flag, obj], "binutils (readelf)")
    if p.returncode != 0:
        raise IntegrityError(f"readelf {flag} {obj} failed: {p.stderr.strip()[:300]}")
    return p.stdout


def demangle(names):
    """{mangled: demangled} through one c++filt call."""
    names = sorted(set(names))
    if not names:
        return {}
    p = tool(["c++filt"], "binutils (c++filt)", stdin="\n".join(names) + "\n")
    lines = p.stdout.split("\n")
    if p.returncode != 0 or len(lines) < len(names):
        raise IntegrityError("c++filt failed: the integrity check needs binutils (c++filt)")
    return dict(zip(names, lines))


def ninja_objects(build):
    """The object files of BUILD's Ninja targets (so that an object left over from a renamed
    source is not read), or None where Ninja cannot list them."""
    try:
        p = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    if p.returncode != 0:
        return None
    return sorted({line.split(":", 1)[0] for line in p.stdout.splitlines() if line.split(":", 1)[0].endswith(".o")})


def target_objects(build, folder, listed):
    """The objects of the target whose folder is BUILD/folder: from Ninja's list (listed), else
    every object under the folder."""
    if listed is None:
        return sorted(glob.glob(os.path.join(build, folder, "**", "*.o"), recursive=True))
    prefix = folder.rstrip("/") + "/"
    return [os.path.join(build, o) for o in listed if o.startswith(prefix) and os.path.isfile(os.path.join(build, o))]


# ---- the rules applied ---------------------------------------------------------------------

STD_ABBREVIATIONS = ("Sa", "Sb", "Ss", "Si", "So", "Sd")


def entity_path(name):
    """The qualified-name components of the entity a mangled symbol names (namespaces and
    classes, then its own name), read up to its first template argument list or parameter list.
    Vtables, typeinfo, guard variables and thunks give the path of what they belong to; a local
    static the path of its function; nvcc's kernel stub __device_stub__<kernel> the kernel's.
    A C name gives [name]; what this does not read gives []."""
    if not name.startswith("_Z"):
        return [name]
    s = name[2:]
    while True:
        special = re.match(r"(TV|TT|TI|TS|GV|GR|TH|TW|Th[n]?\d+_|Tv[n]?\d+_[n]?\d+_)", s)
        if not special:
            break
        s = s[special.end():]
    if s.startswith("Z"):  # a local entity: its function's path
        s = s[1:]
    if s.startswith("L"):  # internal linkage
        s = s[1:]
    nested = s.startswith("N")
    if nested:
        s = s[1:]
        s = s[re.match(r"[rVK]*[RO]?", s).end():]
    path = []
    while s:
        if s.startswith("St"):
            path.append("std")
            s = s[2:]
            continue
        if s[:2] in STD_ABBREVIATIONS:
            path.extend(["std", s[:2]])
            break
        m = re.match(r"\d+", s)
        if not m:
            break
        n = int(m.group())
        path.append(s[m.end():m.end() + n])
        s = s[m.end() + n:]
        if not nested:
            break
    if len(path) == 1 and path[0].startswith("__device_stub__"):
        inner = entity_path("_" + path[0][len("__device_stub__"):])
        return inner or path
    return path


def stub_kernel(name):
    """The mangled kernel name inside nvcc's host stub _Z<n>__device_stub__<kernel>..., or None."""
    m = re.match(r"_Z(\d+)__device_stub__(Z.*)", name)
    if not m:
        return None
    inner = "_" + m.group(2)[:int(m.group(1)) - len("__device_stub__")]
    return inner if len(inner) > 2 else None


NVCC_LOCAL_SCOPE = re.compile(r"(\d+)(_GLOBAL__N__|_INTERNAL_)[0-9a-f]{8}_(\d+)_")


def normalize_anonymous(name):
    """name with nvcc's per-file scope names (_GLOBAL__N__<hash>_<n>_<file>_<hash> for anonymous
    namespaces, _INTERNAL_... likewise) replaced by a fixed one, so that the same entity compiled
    from two copies of a file (the student's and the reference) has one name."""
    out, pos = [], 0
    while True:
        m = NVCC_LOCAL_SCOPE.search(name, pos)
        if not m:
            out.append(name[pos:])
            return "".join(out)
        end = m.end() + int(m.group(3)) + 9  # the file part, "_" and the second 8-digit hash
        length = str(end - m.start(2))
        if not m.group(1).endswith(length):  # not a mangled source name: leave it
            out.append(name[pos:m.end()])
            pos = m.end()
            continue
        tag = m.group(2).rstrip("_") + "_"
        out.append(name[pos:m.end(1) - len(length)] + f"{len(tag)}{tag}")
        pos = end


def in_anonymous_namespace(name):
    """True if the entity's scope holds an anonymous namespace (g++: _GLOBAL__N_1, nvcc:
    _GLOBAL__N__<hash>_<file>_<hash>)."""
    return any(c.startswith("_GLOBAL__N_") for c in entity_path(name)[:-1])


def descriptor_symbol(stage_id):
    """The mangled name of ladder::stage_NN_descriptor() (a track's rung TRACK-NN:
    ladder::TRACK::rung_NN()), the one global a rung must define."""
    if "-" in stage_id:
        track, number = stage_id.split("-")
        ident = f"rung_{number}"
        return f"_ZN6ladder{len(track)}{track}{len(ident)}{ident}Ev"
    ident = f"stage_{stage_id}_descriptor"
    return f"_ZN6ladder{len(ident)}{ident}Ev"


def descriptor_text(stage_id):
    if "-" in stage_id:
        track, number = stage_id.split("-")
        return f"ladder::{track}::rung_{number}()"
    return f"ladder::stage_{stage_id}_descriptor()"


def display(demangled, limit=200):
    """A demangled name shortened for a report: template arguments as <...>, at most limit
    characters."""
    out, depth = [], 0
    for ch in demangled:
        if ch == "<":
            out.append("<...>" if depth == 0 else "")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out).replace(" [clone .cold]", "")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def forbidden(demangled, stage_id=None, needs=()):
    """What rule 1 says a demangled name is, or None. stage_id: a track's rung (TRACK-NN) adds
    its track's rules, then those of the tracks it needs (builds on)."""
    rules = list(FORBIDDEN)
    if stage_id and "-" in stage_id:
        track, number = stage_id.split("-")
        for t in (track, *needs):
            rules += TRACK_FORBIDDEN.get(t, [])
        rules.append((rf"(?<!\w)ladder::{track}::(rung_(?!{number}\b)\d\d|rungs|find_rung)\b",
                      "another rung of the track or its registry"))
    for pattern, why in rules:
        if re.search(pattern, demangled):
            return why
    return None


def allowed(sym, stage_id, reference_weak):
    """True if rule 2 allows an external definition."""
    if sym.name == descriptor_symbol(stage_id) or in_anonymous_namespace(sym.name):
        return True
    if sym.bind not in WEAK:
        return False
    path = entity_path(sym.name)
    if any(tuple(path[:len(scope)]) == scope for scope in STANDARD_SCOPES):
        return True
    return sym.name in REGISTRATION_FOOTPRINT or normalize_anonymous(sym.name) in reference_weak


def first_match(rules, text):
    """The reason of the first (pattern, reason) of rules that matches all of text, or None."""
    return next((why for pattern, why in rules if re.fullmatch(pattern, text)), None)


def import_verdict(name, demangled):
    """Why rule 4 refuses importing the symbol `name` (demangled: c++filt's text), or None if it
    may. C names are judged by name; C++ names by their scope (entity_path): operator new and
    delete, the standard library and the C++ ABI but for IMPORT_STD_DENIED, and the course
    library's LIBRARY_ALLOWED."""
    name = name.split("@")[0]
    if not name.startswith("_Z"):
        why = first_match(IMPORT_DENIED, name)
        if why or any(re.fullmatch(p, name) for p in IMPORT_ALLOWED):
            return why
        return OUTSIDE_IMPORTS
    if re.match(r"operator (new|delete)(\[\])?\(", demangled):
        return None
    path = entity_path(name)
    qualified = "::".join(path)
    if path and path[0] in IMPORT_STD_SCOPES:
        return next((why for pattern, why in IMPORT_STD_DENIED if re.search(pattern, demangled)), None)
    if path and path[0] == "ladder":
        why = first_match(LIBRARY_DENIED, qualified)
        if why or any(re.fullmatch(p, qualified) for p in LIBRARY_ALLOWED):
            return why
        if demangled.startswith("typeinfo"):  # catching the library's exceptions
            return None
        return f"a course-library function {OUTSIDE_IMPORTS}"
    return OUTSIDE_IMPORTS


def called_only_from(target, function, sections, symbols, relocs):
    """True if every relocation of code or data that names the symbol `target` lies inside the
    function `function` (both names as in the symbol table)."""
    nums = {s.num for s in symbols if s.name == target}
    fn = next((s for s in symbols if s.name == function and s.type == "FUNC" and s.ndx.isdigit()), None)
    home = next((x.name for x in sections if fn and str(x.index) == fn.ndx), None)
    for sec_name, entries in relocs.items():
        if sec_name.startswith((".debug", ".eh_frame")):  # descriptions of code, not calls
            continue
        for r in entries:
            if r.sym in nums and not (sec_name == home and fn.value <= r.offset < fn.value + fn.size):
                return False
    return True


# What `#include <iostream>` alone puts in a translation unit's initializer with libstdc++ before
# GCC 13 (Colab's g++ 11 among them): construct the static std::ios_base::Init object and register
# its destructor. An initializer that does this and nothing else is accepted by rule 3.
IOSTREAM_INIT = {"_ZNSt8ios_base4InitC1Ev", "_ZNSt8ios_base4InitD1Ev", "__cxa_atexit", "__dso_handle"}
IOSTREAM_OBJECT = "_ZStL8__ioinit"


def iostream_initializer_only(name, sections, symbols, relocs):
    """True if the function `name` (a _GLOBAL__sub_I_ initializer) only sets up <iostream>: every
    relocation inside it names a function of IOSTREAM_INIT or the translation unit's __ioinit
    object, and it does call std::ios_base::Init's constructor. Anything else it runs (a global
    object's constructor, a function call initializing a global) adds other relocations."""
    fn = next((s for s in symbols if s.name == name and s.type == "FUNC" and s.ndx.isdigit()), None)
    section = next((x for x in sections if str(x.index) == (fn.ndx if fn else "")), None)
    if fn is None or section is None or fn.size == 0:
        return False
    by_num = {s.num: s for s in symbols}
    ioinit = {(s.ndx, s.value) for s in symbols if s.name == IOSTREAM_OBJECT}
    seen = set()
    for r in relocs.get(section.name, []):
        if not fn.value <= r.offset < fn.value + fn.size:
            continue
        sym = by_num.get(r.sym)
        if sym is None:
            return False
        if sym.type == "SECTION":  # a PC-relative reference: the target is addend + 4 bytes on
            if (sym.ndx, r.addend + 4) not in ioinit and (sym.ndx, r.addend) not in ioinit:
                return False
            continue
        if sym.name not in IOSTREAM_INIT and sym.name != IOSTREAM_OBJECT:
            return False
        seen.add(sym.name)
    return "_ZNSt8ios_base4InitC1Ev" in seen


def startup_entries(sections, symbols, relocs):
    """[(section, target)] for every entry of the sections that run code before or after main;
    target is a symbol name, 'section+0xN' where no symbol starts there, or None for an entry
    without a relocation (a fixed address)."""
    by_num = {s.num: s for s in symbols}
    out = []
    for sec in sections:
        if not (STARTUP_SECTIONS.match(sec.name) or sec.type in STARTUP_TYPES):
            continue
        entries = relocs.get(sec.name, [])
        for r in entries:
            sym = by_num.get(r.sym)
            if sym is None:
                out.append((sec.name, None))
            elif sym.type == "SECTION":
                here = [s for s in symbols if s.ndx == sym.ndx and s.value == r.addend and s.type in ("FUNC", "NOTYPE")
                        and s.name]
                here.sort(key=lambda s: s.type != "FUNC")
                out.append((sec.name, here[0].name if here else f"{sym.name or 'section ' + sym.ndx}+0x{r.addend:x}"))
            else:
                out.append((sec.name, sym.name if r.addend == 0 else f"{sym.name}+0x{r.addend:x}"))
        pointer = sec.entsize or 8
        out.extend((sec.name, None) for _ in range(max(0, sec.size // pointer - len(entries))))
    return out


@dataclass
class Finding:
    rule: int   # 1, 2, 3; 0: nothing to check
    obj: str
    text: str

    def line(self):
        if not self.rule:  # the check itself could not run
            return f"{FAIL}: {self.text}"
        return f"{FAIL} rule {self.rule} ({RULE_NAMES[self.rule]}): {self.obj}: {self.text}"


@dataclass
class Report:
    objects: list = field(default_factory=list)
    findings: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    reference: bool = False   # a reference stage object was found (rule 2e)

    @property
    def failed(self):
        return bool(self.findings)

    def lines(self):
        """The report's lines for the technique part: FAIL lines, NOTE lines, or one PASS line."""
        out = [f.line() for f in self.findings[:MAX_LINES]]
        if len(self.findings) > MAX_LINES:
            out.append(f"{FAIL}: ... and {len(self.findings) - MAX_LINES} more")
        out += [f"NOTE: integrity: {n}" for n in self.notes]
        if not self.findings:
            names = ", ".join(os.path.basename(o) for o in self.objects)
            out.insert(0, f"PASS: integrity: {names}: no forbidden name, no symbol outside the rung's allow-list, "
                          "no static constructor")
        return out


def weak_definitions(objs):
    """The weak and unique symbols a list of objects defines (normalize_anonymous applied)."""
    out = set()
    for obj in objs:
        out.update(normalize_anonymous(s.name) for s in parse_symbols(readelf(obj, "-s"))
                   if s.defined and s.bind in WEAK)
    return out


def check_object(obj, stage_id, reference_weak, cuobjdump, report, needs=()):
    """Applies the four rules to one object; appends to report. needs: forbidden's."""
    label = os.path.basename(obj)
    symbols = parse_symbols(readelf(obj, "-s"))
    sections = parse_sections(readelf(obj, "-S"))
    relocs = parse_relocations(readelf(obj, "-r"))
    device = []
    if cuobjdump:
        p = subprocess.run([cuobjdump, "-symbols", obj], capture_output=True, text=True)
        if p.returncode == 0:
            device = parse_device_symbols(p.stdout)
        elif "does not contain device code" not in (p.stdout + p.stderr):
            report.notes.append(f"{label}: cuobjdump -symbols failed, device symbols not read: "
                                f"{(p.stderr or p.stdout).strip()[:200]}")
    named = [s for s in symbols if s.name and s.type not in ("SECTION", "FILE")]
    stubs = {s.name: stub_kernel(s.name) for s in named if stub_kernel(s.name)}
    names = demangle([s.name for s in named] + [n for _b, n in device] + list(stubs.values()))
    for stub, kernel in stubs.items():  # a kernel's host stub: judged by the kernel's name
        names[stub] = f"{names[kernel]} (its host stub)"
    flagged, groups = set(), {}

    def add(rule, text):
        report.findings.append(Finding(rule, label, text))

    # Rule 1, host symbols (called or defined) and device symbols, one finding per kind of use.
    uses = [("calls" if not s.defined else "defines", s.name) for s in named]
    uses += [("device code has", n) for _b, n in device]
    for verb, n in uses:
        why = forbidden(names[n], stage_id, needs)
        if why:
            flagged.add(n)
            shown = groups.setdefault((verb, why), [])
            if display(names[n]) not in shown:
                shown.append(display(names[n]))
    for (verb, why), shown in groups.items():
        if len(shown) == 1:
            add(1, f"{verb} {shown[0]}: {why}")
        else:
            more = f"; and {len(shown) - 3} more" if len(shown) > 3 else ""
            add(1, f"{verb} {len(shown)} symbols of {why}: " + "; ".join(shown[:3]) + more)
    outside = {}  # rule 2, one finding per kind of symbol
    for s in named:
        if s.defined and s.bind in EXTERNAL and s.name not in flagged and not allowed(s, stage_id, reference_weak):
            shown = outside.setdefault(s.bind in WEAK, [])
            if display(names[s.name]) not in shown:
                shown.append(display(names[s.name]))
    for weak, shown in outside.items():
        kind = "weak symbol{} that the reference build does not define" if weak else "global symbol{}"
        what = (f"{shown[0]} (a {kind.format('')})" if len(shown) == 1 else
                f"{len(shown)} {kind.format('s')}: " + "; ".join(shown[:3]) +
                (f"; and {len(shown) - 3} more" if len(shown) > 3 else ""))
        add(2, f"defines {what}, outside the rung's allow-list: with external linkage a rung defines only "
               f"{descriptor_text(stage_id)}, what is in its anonymous namespace, and "
               f"standard-library instantiations")
    refused = {}  # rule 4, one finding per reason
    for s in named:
        if s.defined or s.name in flagged:
            continue
        why = import_verdict(s.name, names[s.name])
        if why and s.name == "atexit" and called_only_from(s.name, NVCC_REGISTRATION, sections, symbols, relocs):
            why = None  # nvcc's registration unregisters the fat binary at exit
        if why:
            shown = refused.setdefault(why, [])
            if display(names[s.name]) not in shown:
                shown.append(display(names[s.name]))
    for why, shown in refused.items():
        what = shown[0] if len(shown) == 1 else (f"{len(shown)} symbols: " + "; ".join(shown[:3]) +
                                                 (f"; and {len(shown) - 3} more" if len(shown) > 3 else ""))
        add(4, f"calls {what}: {why}" + ("" if OUTSIDE_IMPORTS in why else f", {OUTSIDE_IMPORTS}"))
    registrations = 0
    for sec in sections:  # rule 3
        if sec.name in STARTUP_CODE and sec.size:
            add(3, f"has code in {sec.name}, which runs before main or after it")
    for s in symbols:
        if s.type in ("IFUNC", "GNU_IFUNC") and s.defined:
            add(3, f"defines the IFUNC {display(names.get(s.name, s.name))}, whose resolver the loader runs before main")
    for sec_name, target in startup_entries(sections, symbols, relocs):
        if target == NVCC_REGISTRATION and CONSTRUCTOR_SECTIONS.match(sec_name):
            registrations += 1
            if registrations == 1:
                continue
        if (target or "").startswith("_GLOBAL__sub_I_") and CONSTRUCTOR_SECTIONS.match(sec_name) and \
                iostream_initializer_only(target, sections, symbols, relocs):
            continue  # <iostream>'s own initializer (libstdc++ before GCC 13)
        if target is None:
            what = "an entry with a fixed address"
        elif target.startswith("_GLOBAL__sub_I_"):
            what = ("the dynamic initialization of its globals (_GLOBAL__sub_I_...: a global object with a "
                    "constructor, or one initialized by a function call)")
        else:
            what = display(demangle([target]).get(target, target))
        when = "after main" if re.match(r"^\.(fini_array|dtors)", sec_name) else "before main"
        add(3, f"runs {what} from {sec_name} ({when}): only nvcc's kernel registration "
               f"(__sti____cudaRegisterAll) may run outside main")


def check(build, stage_id, cuobjdump=None):
    """Applies the rules to stage NN's objects in BUILD; returns a Report. cuobjdump: its path,
    "" to skip the device symbols, None to look it up."""
    report = Report()
    listed = ninja_objects(build)
    report.objects = target_objects(build, f"CMakeFiles/stage_{stage_id}.dir", listed)
    if not report.objects:
        folder = os.path.join(build, "CMakeFiles", f"stage_{stage_id}.dir")
        report.findings.append(Finding(0, "", f"no compiled objects of stage {stage_id} under {folder}: nothing to check"))
        return report
    references = []
    for folder in REFERENCE_TARGETS:
        objs = target_objects(build, folder.format(id=stage_id), listed)
        references += objs
        report.reference |= folder.startswith("grader/") and bool(objs)
    if not report.reference:
        report.notes.append("no reference solution in this build: weak symbols are compared with the ladder "
                            "libraries only (official runs compare with the reference too)")
    return check_objects(report, stage_id, references, cuobjdump)


def check_objects(report, stage_id, references, cuobjdump=None, needs=()):
    """Applies the rules to report.objects, rule 2e comparing with the objects `references`;
    returns report. cuobjdump as for check; needs: forbidden's."""
    reference_weak = weak_definitions(references)
    if cuobjdump is None:
        cuobjdump = find_cuobjdump()
        if not cuobjdump:
            report.notes.append("device symbols not read: cuobjdump not found (install the CUDA toolkit's "
                                "cuobjdump or pip install nvidia-cuda-cuobjdump, or set CUOBJDUMP)")
    for obj in report.objects:
        check_object(obj, stage_id, reference_weak, cuobjdump, report, needs)
    return report


def check_track(build, rung, rung_file, library, host_library, needs=(), reference_build=None):
    """Applies the rules to the object of a track's rung TRACK-NN (rung_file: its source, relative
    to the repository root) in BUILD's track library `library` (rungs.json's "library"); rule 1
    adds the rules of the tracks in `needs` (the track's "needs"), rule 2e compares with the
    library's other objects (the instructor's code: the grader takes only the rung's file from a
    submission), the ladder libraries and the track's host library `host_library`. Returns a
    Report. reference_build: the instructor's own build of the same tree (the track's reference
    program's); when given, rule 2e compares with its objects instead: a submission may declare a
    shared header (p74-07's reduce.cuh), and then the other objects of BUILD carry its code too."""
    report = Report()
    listed = ninja_objects(build)
    folder = f"CMakeFiles/{library}.dir"
    mine = os.path.join(build, folder, rung_file + ".o")
    everything = target_objects(build, folder, listed)
    report.objects = [o for o in everything if os.path.normpath(o) == os.path.normpath(mine)]
    if not report.objects:
        report.findings.append(Finding(0, "", f"no compiled object of rung {rung} ({mine}): nothing to check"))
        return report
    if reference_build:
        trusted, listed = reference_build, ninja_objects(reference_build)
        references = target_objects(trusted, folder, listed)
    else:
        trusted, references = build, [o for o in everything if o not in report.objects]
    for other in REFERENCE_TARGETS[1:] + (f"CMakeFiles/{host_library}.dir",):
        references += target_objects(trusted, other, listed)
    return check_objects(report, rung, references, needs=needs)


def main(argv):
    if len(argv) != 2:
        print("usage: python3 -m grader.integrity BUILD NN", file=sys.stderr)
        return 2
    try:
        report = check(argv[0], argv[1])
    except IntegrityError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
