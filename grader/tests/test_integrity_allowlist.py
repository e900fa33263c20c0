#!/usr/bin/env python3
"""CPU tests of the grader's allow-lists: integrity rule 4 (what a rung's objects may import,
grader/integrity.py) and the libraries a program really loads (grader/load_audit.c, run through
grader/loaded_libraries.py). No GPU; compiles small objects and programs with g++/cc (nvcc where
there is one), and reads the instructor's rung objects where a build exists (LADDER_BUILD, else
build/). Run: python3 grader/tests/test_integrity_allowlist.py
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True  # leave no __pycache__ in grader/
sys.path.insert(0, ROOT)  # the packages' root: this test is an entry point

from grader import integrity, loaded_libraries, rung_meta, runs, sandbox  # noqa: E402

BUILD = os.environ.get("LADDER_BUILD", os.path.join(ROOT, "build"))
HAVE_GXX = all(shutil.which(t) for t in ("g++", "readelf", "c++filt"))
CC = shutil.which("cc") or shutil.which("gcc")


def compile_object(tmp, folder, name, source, compiler="g++", flags=("-O2",)):
    """Compiles source into tmp/folder/name.o (a build tree's layout); returns the object."""
    src = os.path.join(tmp, "src", name + (".cu" if compiler == "nvcc" else ".cpp"))
    os.makedirs(os.path.dirname(src), exist_ok=True)
    with open(src, "w") as f:
        f.write(source)
    obj = os.path.join(tmp, folder, name + ".o")
    os.makedirs(os.path.dirname(obj), exist_ok=True)
    p = subprocess.run([compiler, "-c", "-std=c++17", *flags, "-o", obj, src], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{compiler} failed on {name}:\n{p.stderr}")
    return obj


def rule_lines(report, rule):
    return [l for l in report.lines() if l.startswith(f"{integrity.FAIL} rule {rule} ")]


class ImportVerdictTest(unittest.TestCase):
    """integrity.import_verdict on names alone."""

    def test_c_names(self):
        for name in ("memcpy", "__memcpy_chk", "printf", "__printf_chk", "puts", "fwrite", "stderr", "expf", "sqrt",
                     "__cxa_guard_acquire", "__cxa_atexit", "_Unwind_Resume", "__gxx_personality_v0", "__dso_handle",
                     "cudaLaunchKernel", "cudaMemcpyAsync", "__cudaRegisterFunction", "__cudaPushCallConfiguration",
                     "__stack_chk_fail", "__libc_single_threaded", "strtol", "__isoc23_strtol", "malloc", "abort"):
            with self.subTest(name):
                self.assertIsNone(integrity.import_verdict(name, name))
        refused = {"dl_iterate_phdr": "dynamic loader", "dlopen": "dynamic loader", "getauxval": "dynamic loader",
                   "cudaGetDriverEntryPoint": "driver entry point", "cuGetProcAddress_v2": "driver entry point",
                   "cuLibraryLoadData": "driver API", "cudaLibraryLoadFromFile": "runtime library loader",
                   "fopen": "file", "open64": "file", "__open_2": "file", "readlink": "file", "close": "descriptor",
                   "getenv": "environment", "setenv": "environment", "mmap": "memory mapping",
                   "mprotect": "memory mapping", "syscall": "process escape", "ptrace": "process escape",
                   "signal": "signal", "sigaction": "signal", "atexit": "at exit", "exit": "early exit",
                   "_exit": "early exit", "pthread_create": "host thread", "GOMP_parallel": "host thread",
                   "gethostname": integrity.OUTSIDE_IMPORTS, "rand": integrity.OUTSIDE_IMPORTS}
        for name, words in refused.items():
            with self.subTest(name):
                self.assertIn(words, integrity.import_verdict(name, name) or "")

    @unittest.skipUnless(HAVE_GXX, "needs c++filt")
    def test_cxx_names(self):
        cases = {  # mangled name: None (allowed) or words of the reason
            "_Znwm": None, "_ZdlPvm": None, "_ZnwmSt11align_val_t": None, "_ZdaPv": None,
            "_ZSt20__throw_length_errorPKc": None, "_ZTISt13runtime_error": None,
            "_ZTVN10__cxxabiv120__si_class_type_infoE": None,
            "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_appendEPKcm": None,
            "_ZNSt6chrono3_V212steady_clock3nowEv": None,
            "_ZN6ladder16throw_cuda_errorE9cudaErrorPKcS2_i": None, "_ZNK6ladder7Problem5out_wEv": None,
            "_ZN6ladder10blocks_forExiPKc": None, "_ZN6ladder29shared_memory_per_block_limitEv": None,
            "_ZN6ladder3p3813make_geometryERKNS0_9Problem38E": None, "_ZN6ladder3p3812pool_divisorERKNS0_9Problem38Eil": None,
            "_ZN6ladder3p748grid_forEliPKc": None, "_ZNK6ladder3p749Problem748out_sizeEv": None,
            "_ZN6ladder21encode_tensor_map_f32ERKNS_12TensorMapF32EPKc": None,  # the library's driver lookup
            "_ZN6ladder14pool_referenceERKNS_7ProblemEPKf": "CPU oracle",
            "_ZN6ladder10GpuSession22time_cub_segmented_sumEiib": "timing",
            "_ZN6ladder10GpuSessionC1ERKNS_7ProblemE": "timing",
            "_ZN6ladder11make_inputsERKNS_7ProblemE": "input generator",
            "_ZN6ladder15standard_normalEmmm": "input generator",
            "_ZN6ladder15stage_toleranceERKNS_7ProblemERKNS_9ReferenceENS_9PrecisionE": "tolerance",
            "_ZN6ladder3p387compareERKSt6vectorIdSaIdEES5_S5_": "comparison",
            "_ZN6ladder3p7413bitwise_equalERKNS0_13ForwardResultES3_": "checker",
            "_ZN6ladder19stage_10_descriptorEv": "another rung",
            "_ZN6ladder3npy8load_f32ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE": "course-library function",
            "_ZNSt14basic_ifstreamIcSt11char_traitsIcEEC1EPKcSt13_Ios_Openmode": "file access",
            "_ZNSt10filesystem6statusERKNS_7__cxx114pathE": "file access",
            "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE": "host thread",
            "_ZN4cute4copyEv": integrity.OUTSIDE_IMPORTS,
        }
        names = integrity.demangle(cases)
        for name, words in cases.items():
            with self.subTest(names[name]):
                got = integrity.import_verdict(name, names[name])
                if words is None:
                    self.assertIsNone(got)
                else:
                    self.assertIn(words, got or "")


# A rung that uses the C++ and C libraries as honest code does: containers, strings, streams,
# exceptions, smart pointers, a mutex, function-local statics, printf and math.
HONEST = r"""
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>
namespace ladder {
struct StageDescriptor { std::vector<int> changes; };
namespace {
struct Plan { std::string name; std::vector<float> w; };
std::mutex lock;
int work(int n) {
  std::lock_guard<std::mutex> guard(lock);
  static std::map<int, std::string> names;
  std::unordered_map<std::string, int> seen;
  auto plan = std::make_shared<Plan>();
  plan->name = "plan " + std::to_string(n) + " " + std::to_string(std::stoi("7"));
  std::mt19937 gen(n);
  std::normal_distribution<float> normal;
  for (int i = 0; i < n; ++i) plan->w.push_back(std::sqrt(std::fabs(normal(gen))) + std::exp(float(i)) + std::pow(2.0, i));
  std::sort(plan->w.begin(), plan->w.end());
  std::function<float(float)> f = [](float x) { return std::tanh(x); };
  std::ostringstream os;
  os << plan->name << f(plan->w[0]) << std::accumulate(plan->w.begin(), plan->w.end(), 0.0);
  names[n] = os.str();
  seen[os.str()] = n;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d", n);
  std::memcpy(buf, "x", 1);
  auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  if (n < 0) throw std::runtime_error("negative " + std::string(buf));
  std::printf("%s %lld\n", buf, (long long)t);
  std::fprintf(stderr, "%zu\n", std::strlen(buf));
  std::cout << names[n] << std::endl;
  std::unique_ptr<int[]> scratch(new int[n]);
  unsigned __int128 wide = (unsigned __int128)t * 12345u;  // libgcc's __udivti3, __popcountdi2
  wide /= (unsigned __int128)(n + 1);
  return int(seen.size()) + scratch[0] + int(wide) + __builtin_popcountll((unsigned long long)t);
}
}  // namespace
const StageDescriptor& stage_{id}_descriptor() {
  static const StageDescriptor d{{work(3)}};
  return d;
}
}  // namespace ladder
"""
LOADER = r"""
#include <link.h>
#include <cstring>
namespace {
// The issue's loader: find libc among the loaded objects, then its dlopen by hand (not shown).
int find(dl_phdr_info* info, size_t, void* out) {
  if (std::strstr(info->dlpi_name, "libc.so")) *static_cast<const char**>(out) = info->dlpi_name;
  return 0;
}
}
namespace ladder { const char* stage_{id}_descriptor() { const char* libc = nullptr; dl_iterate_phdr(find, &libc); return libc; } }
"""
CHEATS = {  # name: (source, words of the rule-4 finding)
    "loader": (LOADER, "calls dl_iterate_phdr: the dynamic loader"),
    "pool_reference": ("#include <vector>\nnamespace ladder { struct Problem;\n"
                       "std::vector<double> pool_reference(const Problem&, const float*);\n"
                       "int stage_{id}_descriptor(const Problem& p) { return (int)pool_reference(p, nullptr).size(); } }\n",
                       "calls ladder::pool_reference(ladder::Problem const&, float const*): a CPU oracle"),
    "cub_timing": ("namespace ladder { struct GpuSession { double time_cub_segmented_sum(int, int, bool); };\n"
                   "double stage_{id}_descriptor(GpuSession& s) { return s.time_cub_segmented_sum(1, 1, false); } }\n",
                   "calls ladder::GpuSession::time_cub_segmented_sum(int, int, bool): the runner's timing"),
    "files": ('#include <cstdio>\n#include <cstdlib>\nnamespace ladder { int stage_{id}_descriptor() {\n'
              '  FILE* f = std::fopen(std::getenv("HOME"), "r"); return f != nullptr; } }\n', "calls fopen: file"),
    "environment": ('#include <cstdlib>\nnamespace ladder { int stage_{id}_descriptor() { return std::getenv("X") != nullptr; } }\n',
                    "calls getenv: the environment"),
    "mapping": ("#include <sys/mman.h>\nnamespace ladder { void* stage_{id}_descriptor() {\n"
                "  void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n"
                "  mprotect(p, 4096, PROT_READ | PROT_EXEC); return p; } }\n", "memory mapping or protection"),
    "at_exit": ("#include <cstdlib>\nnamespace { void late() {} }\n"
                "namespace ladder { int stage_{id}_descriptor() { return std::atexit(late); } }\n", "calls atexit: code at exit"),
    "early_exit": ("#include <cstdlib>\nnamespace ladder { void stage_{id}_descriptor() { std::exit(0); } }\n",
                   "calls exit: code at exit, or an early exit"),
    "ifstream": ("#include <fstream>\n#include <string>\nnamespace ladder { std::string stage_{id}_descriptor() {\n"
                 '  std::ifstream in("/proc/self/environ"); std::string s; in >> s; return s; } }\n', "file access"),
    "thread": ("#include <thread>\nnamespace ladder { void stage_{id}_descriptor() { std::thread t([] {}); t.detach(); } }\n",
               "a host thread"),
    "entry_point": ('extern "C" int cudaGetDriverEntryPoint(const char*, void**, unsigned long long, void*);\n'
                    'namespace ladder { void* stage_{id}_descriptor() { void* f = nullptr;\n'
                    '  cudaGetDriverEntryPoint("cuLibraryLoadData", &f, 0, nullptr); return f; } }\n', "driver entry point"),
    # The lookup stage 17's encoder needs, done in the rung rather than through the course library's
    # ladder::encode_tensor_map_f32 (common/toolkit/tensor_map.cpp): refused all the same.
    "versioned_entry_point": ('extern "C" int cudaGetDriverEntryPointByVersion(const char*, void**, unsigned, '
                              'unsigned long long, void*);\n'
                              'namespace ladder { void* stage_{id}_descriptor() { void* f = nullptr;\n'
                              '  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, 0, nullptr);'
                              ' return f; } }\n', "driver entry point"),
    "other_rung": ("namespace ladder { struct StageDescriptor; const StageDescriptor& stage_10_descriptor();\n"
                   "const StageDescriptor& stage_{id}_descriptor() { return stage_10_descriptor(); } }\n",
                   "calls ladder::stage_10_descriptor(): another rung's registration"),
}


@unittest.skipUnless(HAVE_GXX, "needs g++, readelf and c++filt")
class ImportObjectsTest(unittest.TestCase):
    """Rule 4 on objects compiled here."""

    def test_honest_code_passes(self):
        builds = {"O2": ("-O2",), "O0": ("-O0",), "fortify": ("-O2", "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong")}
        with tempfile.TemporaryDirectory(prefix="ia_") as tmp:
            for label, flags in builds.items():
                with self.subTest(label):
                    stage = f"h{label.lower()}"
                    compile_object(tmp, f"CMakeFiles/stage_{stage}.dir", label, HONEST.replace("{id}", stage), flags=flags)
                    report = integrity.check(tmp, stage, cuobjdump="")
                    self.assertEqual(rule_lines(report, 4), [], report.lines())

    def test_cheats_fail_rule_4(self):
        with tempfile.TemporaryDirectory(prefix="ia_") as tmp:
            for name, (source, words) in CHEATS.items():
                with self.subTest(name):
                    compile_object(tmp, f"CMakeFiles/stage_{name}.dir", name, source.replace("{id}", name))
                    lines = rule_lines(integrity.check(tmp, name, cuobjdump=""), 4)
                    self.assertTrue(any(words in l for l in lines), "\n".join(lines) or "no rule-4 finding")
                    self.assertTrue(all("(imports)" in l for l in lines))

    def test_the_library_tensor_map_encoder_passes(self):
        """A rung that encodes its tensor map through the course library (as stage 17 does) imports
        ladder::encode_tensor_map_f32, not the driver lookup inside it: no rule-4 finding."""
        source = ("namespace ladder { struct TensorMapF32 { int rank; }; struct Map { unsigned char bytes[128]; };\n"
                  "Map encode_tensor_map_f32(const TensorMapF32& m, const char* what);\n"
                  'Map stage_tm_descriptor() { TensorMapF32 m{5}; return encode_tensor_map_f32(m, "x"); } }\n')
        with tempfile.TemporaryDirectory(prefix="ia_") as tmp:
            obj = compile_object(tmp, "CMakeFiles/stage_tm.dir", "tm", source)
            self.assertIn("_ZN6ladder21encode_tensor_map_f32ERKNS_12TensorMapF32EPKc",
                          [s.name for s in integrity.parse_symbols(integrity.readelf(obj, "-s")) if not s.defined])
            report = integrity.check(tmp, "tm", cuobjdump="")
            self.assertEqual(rule_lines(report, 4), [], report.lines())

    def test_rule_1_is_not_repeated(self):
        """A name rule 1 already refuses (dlopen) gives no second finding under rule 4."""
        source = ('#include <dlfcn.h>\nnamespace ladder { void* stage_dl_descriptor() '
                  '{ return dlopen("libcublas.so", RTLD_NOW); } }\n')
        with tempfile.TemporaryDirectory(prefix="ia_") as tmp:
            compile_object(tmp, "CMakeFiles/stage_dl.dir", "dl", source)
            report = integrity.check(tmp, "dl", cuobjdump="")
            self.assertTrue(rule_lines(report, 1))
            self.assertEqual(rule_lines(report, 4), [])


@unittest.skipUnless(shutil.which("nvcc") and HAVE_GXX, "needs nvcc")
class ImportNvccTest(unittest.TestCase):
    """nvcc's registration calls atexit (to unregister the fat binary): allowed there, not
    elsewhere in the rung."""

    def test_atexit_only_from_the_registration(self):
        kernel = ("namespace ladder { struct StageDescriptor { int id; };\n"
                  "namespace { __global__ void pool(float* p) { p[threadIdx.x] += 1.0f; } void late() {} }\n"
                  "const StageDescriptor& stage_{id}_descriptor() { pool<<<1, 32>>>(nullptr); {extra}"
                  " static StageDescriptor d{42}; return d; } }\n")
        with tempfile.TemporaryDirectory(prefix="ia_") as tmp:
            for flags in (("-O2",), ("-O0", "-g")):
                with self.subTest(flags):
                    tag = "o2" if flags == ("-O2",) else "o0"
                    obj = compile_object(tmp, f"CMakeFiles/stage_{tag}.dir", "clean",
                                         kernel.replace("{id}", tag).replace("{extra}", ""), compiler="nvcc", flags=flags)
                    self.assertIn("atexit", [s.name for s in integrity.parse_symbols(integrity.readelf(obj, "-s"))
                                             if not s.defined])
                    report = integrity.check(tmp, tag, cuobjdump="")
                    self.assertEqual(rule_lines(report, 4), [], report.lines())
            compile_object(tmp, "CMakeFiles/stage_late.dir", "late",
                           "#include <cstdlib>\n" + kernel.replace("{id}", "late").replace("{extra}", "std::atexit(late);"),
                           compiler="nvcc")
            lines = rule_lines(integrity.check(tmp, "late", cuobjdump=""), 4)
            self.assertTrue(any("calls atexit: code at exit" in l for l in lines), lines)


def rung_objects(build):
    """[(rung id, check function)] for the instructor's assignable rungs built in BUILD."""
    with open(os.path.join(ROOT, "grader", "rungs.json")) as f:
        config = json.load(f)
    graded = [sid for sid, (_folder, meta) in rung_meta.stages(ROOT).items() if "grader" in meta]
    out = [(r, lambda r=r: integrity.check(build, r, cuobjdump="")) for r in graded
           if glob.glob(os.path.join(build, "CMakeFiles", f"stage_{r}.dir", "**", "*.o"), recursive=True)]
    for name, t in config.get("tracks", {}).items():
        library = f"{name}_track"
        host = f"{name}_host"
        for obj in sorted(glob.glob(os.path.join(build, "CMakeFiles", f"{library}.dir", "tracks", "*", "rungs", "*",
                                                 "*.o"))):
            rung_file = os.path.relpath(obj, os.path.join(build, "CMakeFiles", f"{library}.dir"))[:-2]
            number = os.path.basename(os.path.dirname(rung_file))[:2]  # its folder rungs/NN_name/
            if number == "00":  # the CPU reference rung: not assignable, it uses OpenMP threads
                continue
            out.append((f"{name}-{number}", lambda r=f"{name}-{number}", f=rung_file, l=library, h=host, n=t.get("needs", []):
                        integrity.check_track(build, r, f, l, h, n)))
    return out


@unittest.skipUnless(HAVE_GXX and glob.glob(os.path.join(BUILD, "CMakeFiles", "stage_*.dir")), "needs a build (LADDER_BUILD)")
class ReferenceObjectsTest(unittest.TestCase):
    """Every instructor rung in the build passes rule 4 (stages 01-13, rungs p38-01..07, p74-01..09)."""

    def test_references_pass(self):
        rungs = rung_objects(BUILD)
        self.assertTrue(rungs)
        for rung, run in rungs:
            with self.subTest(rung):
                report = run()
                self.assertEqual(rule_lines(report, 4), [], report.lines())


# A program that loads what its arguments say, and can try to get around the audit.
PROGRAM = r"""
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int fd = getenv("LADDER_LOAD_AUDIT_FD") ? atoi(getenv("LADDER_LOAD_AUDIT_FD")) : -1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "close")) close(fd);
    else if (!strcmp(a, "devnull")) dup2(open("/dev/null", O_WRONLY), fd);
    else if (!strncmp(a, "write:", 6)) (void)!write(fd, a + 6, strlen(a + 6));
    else if (!dlopen(a, RTLD_NOW)) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  }
  return 0;
}
"""


@unittest.skipUnless(CC and sys.platform.startswith("linux"), "needs a C compiler and glibc")
class LoadAuditTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="la_")
        cls.audit = loaded_libraries.build_audit(os.path.join(cls.tmp, "cache"))
        src = os.path.join(cls.tmp, "prog.c")
        with open(src, "w") as f:
            f.write(PROGRAM)
        cls.prog = os.path.join(cls.tmp, "prog")
        subprocess.run([CC, "-o", cls.prog, src, "-ldl"], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_audited(self, cmd):
        env, fds, collect = loaded_libraries.audited(cmd, self.audit)
        p = subprocess.run(cmd, env={**os.environ, **env}, pass_fds=fds, capture_output=True, text=True, timeout=60)
        return p, collect()

    def test_build_is_cached(self):
        again = loaded_libraries.build_audit(os.path.join(self.tmp, "cache"))
        self.assertEqual(again, self.audit)
        self.assertEqual(len(glob.glob(os.path.join(self.tmp, "cache", "*.so"))), 1)

    def test_nothing_extra_passes(self):
        p, lines = self.run_audited([self.prog])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(lines[0], f"{loaded_libraries.MAIN}{os.path.realpath(self.prog)}")
        self.assertTrue(any(os.path.basename(l) == "libc.so.6" for l in lines), lines)
        self.assertEqual(loaded_libraries.check(lines, program=self.prog), [])

    def test_dlopen_is_seen(self):
        p, lines = self.run_audited([self.prog, "libm.so.6"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(any(os.path.basename(l) == "libm.so.6" for l in lines), lines)
        self.assertEqual(loaded_libraries.check(lines, program=self.prog), [])
        other = next((n for n in ("libz.so.1", "libcrypto.so.3", "libcrypto.so.1.1", "libexpat.so.1")
                      if subprocess.run([self.prog, n], capture_output=True).returncode == 0), None)
        if other is None:
            self.skipTest("no libz, libcrypto or libexpat to load")
        p, lines = self.run_audited([self.prog, other])
        findings = loaded_libraries.check(lines, program=self.prog)
        self.assertEqual(len(findings), 1, findings)
        self.assertIn(other, findings[0])
        self.assertIn("outside the allowed libraries", findings[0])

    def test_allowed_name_from_a_writable_folder(self):
        libm = next((l for l in self.run_audited([self.prog, "libm.so.6"])[1] if l.endswith("/libm.so.6")), None)
        copy = os.path.join(self.tmp, "libcudart.so.13")
        shutil.copy(libm, copy)
        p, lines = self.run_audited([self.prog, copy])
        self.assertEqual(p.returncode, 0, p.stderr)
        findings = loaded_libraries.check(lines, program=self.prog, untrusted=[self.tmp])
        self.assertEqual(len(findings), 1, findings)
        self.assertIn("from a folder the program can write", findings[0])

    def test_channel_tampering(self):
        for how in ("close", "devnull"):
            with self.subTest(how):
                p, lines = self.run_audited([self.prog, how, "libm.so.6"])
                self.assertEqual(p.returncode, loaded_libraries.AUDIT_EXIT, p.stderr)
                self.assertIn("closed or replaced", p.stderr)
        # Lines a program adds are judged too; a partial line cannot hide the next path.
        p, lines = self.run_audited([self.prog, "write:\n[main] /bin/true\n", "write:/usr/lib/x86_64-linux-gnu/",
                                     "libm.so.6"])
        findings = loaded_libraries.check(lines, program=self.prog)
        self.assertTrue(any("another program ran" in f for f in findings), findings)
        self.assertIn("/usr/lib/x86_64-linux-gnu/", lines)

    def test_no_channel_fails_closed(self):
        env = {**os.environ, "LD_AUDIT": self.audit}
        env.pop(loaded_libraries.FD_VARIABLE, None)
        p = subprocess.run([self.prog], env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, loaded_libraries.AUDIT_EXIT)

    def test_check_rules(self):
        check = loaded_libraries.check
        main = loaded_libraries.MAIN
        ok = [f"{main}/w/prog", "/lib64/ld-linux-x86-64.so.2", "linux-vdso.so.1", "/lib/x86_64-linux-gnu/libc.so.6",
              "/usr/local/cuda/lib/libcudart.so.13", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
              "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.580.65.06", "/lib/x86_64-linux-gnu/libgomp.so.1",
              "/usr/lib/wsl/lib/libdxcore.so"]
        self.assertEqual(check(ok, program="/w/prog"), [])
        self.assertIn("reported nothing", check([])[0])
        self.assertTrue(any("another program ran under the audit: /w/prog" in f for f in check(ok, program="/w/other")))
        bad = {"/usr/local/cuda/lib64/libcublas.so.13": "outside", "/opt/x/libcudnn.so.9": "outside",
               "/w/build/libstudent.so": "outside", "/proc/self/cwd/libcuda.so.1": "can write",
               "lib/libcudart.so.13": "can write", "/w/build/libcudart.so.13": "can write",
               "libm.so.6": "without a path", "[over 1048576 bytes]": "unexpected line"}
        for line, words in bad.items():
            with self.subTest(line):
                findings = check(ok + [line], program="/w/prog", untrusted=["/w/build"])
                self.assertEqual(len(findings), 1, findings)
                self.assertIn(words, findings[0])
        wrapped = [f"{main}/usr/bin/bwrap", "/lib/x86_64-linux-gnu/libselinux.so.1"] + ok
        self.assertEqual(check(wrapped, program="/w/prog", wrappers=["/usr/bin/bwrap"]), [])
        self.assertTrue(check(wrapped, program="/w/prog"))
        self.assertEqual(loaded_libraries.report_lines(["loaded /x/libcublas.so.13: outside"], "prog"),
                         [f"{integrity.FAIL} rule 5 (loaded libraries): prog: loaded /x/libcublas.so.13: outside"])
        with self.assertRaises(ValueError):
            loaded_libraries.audited(["/usr/local/cuda/bin/compute-sanitizer", "/w/prog"], self.audit)

    @unittest.skipUnless(os.path.isfile(os.path.join(BUILD, "stage_03_shared_tree")), "needs build/stage_03_shared_tree")
    def test_stage_program(self):
        """A course program (--help: its libraries load, nothing runs on a GPU) loads only what is allowed."""
        program = os.path.join(BUILD, "stage_03_shared_tree")
        p, lines = self.run_audited([program, "--help"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(loaded_libraries.check(lines, program=program), [], lines)


@unittest.skipUnless(CC and sys.platform.startswith("linux"), "needs a C compiler and glibc")
class JailAuditTest(unittest.TestCase):
    """The grader's runs (runs.Jail) go through the load audit: a library outside the allow-list
    becomes an integrity rule 5 line, and loaded_library_verdict takes the rung's points."""

    def jails(self, tmp):
        yield runs.Jail(os.path.join(tmp, "plain"), "none")
        ok, _why = sandbox.bwrap_works()
        lease = sandbox.UidLease()
        self.addCleanup(lease.release)
        if ok and sandbox.traversable(tmp):
            yield runs.Jail(os.path.join(tmp, "boxed"), "bwrap", lease.uid)
        if os.geteuid() == 0 and sandbox.traversable(tmp):
            yield runs.Jail(os.path.join(tmp, "user"), "user", lease.uid)

    def test_runs_are_audited(self):
        tmp = tempfile.mkdtemp(prefix="ja_", dir="/tmp")
        os.chmod(tmp, 0o755)
        self.addCleanup(shutil.rmtree, tmp, True)
        src = os.path.join(tmp, "prog.c")
        with open(src, "w") as f:
            f.write(PROGRAM)
        for jail in self.jails(tmp):
            with self.subTest(isolation=jail.isolation):
                jail.enable_audit()
                prog = os.path.join(jail.dirs["build"], "prog")
                subprocess.run([CC, "-o", prog, src, "-ldl"], check=True)
                runs.readable(jail.dirs["build"])
                inside = jail.inside("build", "prog")
                p, _io = jail.run(lambda io: [inside, "libm.so.6"], 60)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(jail.findings_since(0), [])
                other = next((n for n in ("libz.so.1", "libexpat.so.1", "libcrypto.so.3")
                              if subprocess.run([prog, n], capture_output=True).returncode == 0), None)
                if other is None:
                    self.skipTest("no libz, libexpat or libcrypto to load")
                mark = len(jail.loaded)
                jail.run(lambda io: [inside, other], 60)
                lines = jail.findings_since(mark)
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("rule 5", lines[0])
                self.assertIn(other, lines[0])

    def test_verdict_takes_the_points(self):
        from grader import reports
        parts = [reports.Part(rung="03 x", part=k, max_score=10, score=10, output="ok")
                 for k in ("technique", "public", "hidden", "sanitizer", "performance")]
        runs.loaded_library_verdict(parts, ["FAIL: integrity rule 5 (loaded libraries): prog: loaded /x/libz.so.1"])
        scores = {p.part: p.score for p in parts}
        self.assertEqual(scores, {"technique": 0, "public": 0, "hidden": 0, "sanitizer": 0, "performance": 0})
        self.assertIn("rule 5", next(p.output for p in parts if p.part == "technique"))
        untouched = [reports.Part(rung="03 x", part="public", max_score=10, score=10, output="ok")]
        self.assertEqual(runs.loaded_library_verdict(untouched, [])[0].score, 10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
