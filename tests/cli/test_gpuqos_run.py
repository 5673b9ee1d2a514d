# SPDX-License-Identifier: Apache-2.0
"""`gpuqos run` with real child processes.

usage: test_gpuqos_run.py GPUQOS STUB_LIB OTHER_LIB GROUP
GROUP: env | dedupe | bad_args | missing_lib | lookup | exec | windows | all

STUB_LIB stands in for libgpuqos-preempt.so, OTHER_LIB for a user's own
LD_PRELOAD entry; both are harmless shared objects built with the tests.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from gpuqos_test import check, run_main

GPUQOS = STUB = OTHER = None
# Prints what the node agent and ld.so will see, and the child's own pid.
PROBE = ['/bin/sh', '-c',
         'echo "class=$GPUQOS_RUN_CLASS"; echo "preload=$LD_PRELOAD"; '
         'echo "socket=${GPUQOS_SOCKET-unset}"; echo "pid=$$"']


def base_env(**kw):
    e = {k: v for k, v in os.environ.items()
         if k not in ("LD_PRELOAD", "GPUQOS_PREEMPT_LIB", "GPUQOS_RUN_CLASS", "GPUQOS_SOCKET",
                      "GPUQOS_RUN_WINDOWS")}
    # gpuqos itself is built with ASan, whose runtime wants to be first in
    # the link map; a user's LD_PRELOAD entry would come before it.
    e["ASAN_OPTIONS"] = "verify_asan_link_order=0:" + e.get("ASAN_OPTIONS", "")
    e.update(kw)
    return e


def run(args, env, exe=None):
    """Runs `gpuqos run ARGS`; returns rc, the probe's fields, stderr and
    the pid gpuqos was started as."""
    p = subprocess.Popen([exe or GPUQOS, "run"] + args, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=20)
    fields = dict(ln.split("=", 1) for ln in out.decode().splitlines() if "=" in ln)
    err = err.decode(errors="replace")
    check("Sanitizer" not in err and "runtime error" not in err, f"{args}: sanitizer: {err}")
    check("ld.so" not in err, f"{args}: ld.so complained: {err}")
    return p.returncode, fields, err, p.pid


def t_env():
    stub = os.path.realpath(STUB)
    rc, f, err, pid = run(["--class", "lc", "--"] + PROBE,
                          base_env(GPUQOS_PREEMPT_LIB=STUB, LD_PRELOAD=OTHER))
    check(rc == 0, f"run lc: rc {rc} {err}")
    check(f.get("class") == "latency-critical", f"class {f}")
    check(f.get("preload") == stub + ":" + OTHER, f"LD_PRELOAD {f.get('preload')!r}")
    check(f.get("socket") == "unset", f"GPUQOS_SOCKET set without --socket: {f}")
    # exec, not fork: the workload keeps the pid the launcher was started as.
    check(f.get("pid") == str(pid), f"pid {f.get('pid')} != gpuqos pid {pid}")
    # The one line allowed: no node agent at the default socket (the
    # workload still ran, above); cli.first_run_no_agent checks it.
    other = [ln for ln in err.splitlines() if "runs without QoS" not in ln]
    check(other == [] and err.count("\n") <= 1, f"run lc: unexpected stderr {err!r}")

    for cls, canon in [("be", "best-effort"), ("best-effort", "best-effort"),
                       ("latency-critical", "latency-critical")]:
        rc, f, err, _ = run(["--class", cls, "--socket", "/tmp/a.sock"] + PROBE,
                            base_env(GPUQOS_PREEMPT_LIB=STUB))
        check(rc == 0 and f.get("class") == canon, f"--class {cls}: {f} {err}")
        check(f.get("preload") == stub, f"--class {cls}: LD_PRELOAD {f.get('preload')!r}")
        check(f.get("socket") == "/tmp/a.sock", f"--socket not passed: {f}")
    rc, f, err, _ = run(["--class=be", "--socket=/tmp/b.sock", "--"] + PROBE,
                        base_env(GPUQOS_PREEMPT_LIB=STUB))
    check(rc == 0 and f.get("class") == "best-effort" and f.get("socket") == "/tmp/b.sock",
          f"--opt=value forms: {f} {err}")
    # The user's command line reaches the workload untouched.
    rc, f, err, _ = run(["--class", "be", "/bin/sh", "-c", 'echo "args=$0|$1|$2"', "a b", "--x", ""],
                        base_env(GPUQOS_PREEMPT_LIB=STUB))
    check(rc == 0 and f.get("args") == "a b|--x|", f"arguments: {f} {err}")


def t_dedupe():
    stub = os.path.realpath(STUB)
    d = tempfile.mkdtemp(prefix="gpuqos-run-")
    link = os.path.join(d, "preempt-link.so")
    os.symlink(stub, link)
    for old in [stub, OTHER + ":" + stub, f"{stub} {OTHER}", f"{link}:{OTHER}:{stub}",
                f"  {OTHER}::{link} "]:
        rc, f, err, _ = run(["--class", "be"] + PROBE,
                            base_env(GPUQOS_PREEMPT_LIB=STUB, LD_PRELOAD=old))
        want = stub if old == stub else stub + ":" + OTHER
        check(rc == 0 and f.get("preload") == want,
              f"LD_PRELOAD={old!r} became {f.get('preload')!r}, want {want!r} ({err})")
    # A relative GPUQOS_PREEMPT_LIB is made absolute: the workload may chdir.
    rc, f, err, _ = run(["--class", "be"] + PROBE,
                        base_env(GPUQOS_PREEMPT_LIB=os.path.relpath(STUB)))
    check(f.get("preload") == stub, f"relative library path: {f.get('preload')!r}")
    shutil.rmtree(d)


def t_bad_args():
    d = tempfile.mkdtemp(prefix="gpuqos-run-")
    marker = os.path.join(d, "ran")
    touch = ["/bin/sh", "-c", f"touch {marker}"]
    env = base_env(GPUQOS_PREEMPT_LIB=STUB)
    for args, msg in [(["--class", "fast", "--"] + touch, "unknown class"),
                      (["--class", "LC", "--"] + touch, "unknown class"),
                      (["--class", "", "--"] + touch, "unknown class"),
                      (["--"] + touch, "--class"),
                      (touch, "--class"),
                      (["--class", "lc"], "command"),
                      (["--class", "lc", "--"], "command"),
                      (["--class"], "needs a value"),
                      (["--class", "lc", "--socket", "", "--"] + touch, "--socket"),
                      (["--clas", "lc", "--"] + touch, "unknown option")]:
        rc, _, err, _ = run(args, env)
        check(rc == 2, f"run {args}: rc {rc}, want 2")
        check(msg in err, f"run {args}: {msg!r} not in {err!r}")
        check(not os.path.exists(marker), f"run {args}: the command ran")
    for args in (["frob"], []):
        p = subprocess.run([GPUQOS] + args, env=env, capture_output=True, timeout=20)
        check(p.returncode == 2, f"gpuqos {args}: rc {p.returncode}")
    for args, want in ((["--help"], "gpuqos run --class"), (["version"], "gpuqos 0.1.0"),
                       (["run", "--help"], "gpuqos run --class")):
        p = subprocess.run([GPUQOS] + args, env=env, capture_output=True, timeout=20)
        check(p.returncode == 0 and want in p.stdout.decode(), f"gpuqos {args}: {p}")
    shutil.rmtree(d)


def t_missing_lib():
    rc, f, err, pid = run(["--class", "lc", "--"] + PROBE,
                          base_env(GPUQOS_PREEMPT_LIB="/nonexistent/libgpuqos-preempt.so",
                                   LD_PRELOAD=OTHER))
    check(rc == 0, f"missing library: rc {rc}")
    check("warning" in err and "/nonexistent/libgpuqos-preempt.so" in err
          and "without the gpuqos preempt agent" in err, f"missing library: stderr {err!r}")
    check(f.get("class") == "latency-critical" and f.get("preload") == OTHER
          and f.get("pid") == str(pid), f"missing library: the workload saw {f}")
    # A directory is not a library either.
    rc, f, err, _ = run(["--class", "lc"] + PROBE, base_env(GPUQOS_PREEMPT_LIB="/"))
    check(rc == 0 and "not a regular file" in err and f.get("preload") == "",
          f"directory as library: {f} {err}")


def layout(root, exe_rel, lib_rel):
    """A copy of gpuqos at root/exe_rel, and the stub library at root/lib_rel."""
    exe = os.path.join(root, exe_rel)
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    shutil.copy2(GPUQOS, exe)
    if lib_rel:
        lib = os.path.join(root, lib_rel)
        os.makedirs(os.path.dirname(lib), exist_ok=True)
        shutil.copy2(STUB, lib)
    return exe


def t_lookup():
    d = tempfile.mkdtemp(prefix="gpuqos-run-")
    env = base_env()
    # Installed: <prefix>/bin/gpuqos finds <prefix>/lib/gpuqos/.
    exe = layout(os.path.join(d, "prefix"), "bin/gpuqos", "lib/gpuqos/libgpuqos-preempt.so")
    rc, f, err, _ = run(["--class", "be"] + PROBE, env, exe)
    want = os.path.realpath(os.path.join(d, "prefix/lib/gpuqos/libgpuqos-preempt.so"))
    check(rc == 0 and f.get("preload") == want, f"installed layout: {f} {err}")
    # Build tree: <build>/agent/cli/gpuqos finds <build>/agent/preempt/.
    exe = layout(os.path.join(d, "build"), "agent/cli/gpuqos",
                 "agent/preempt/libgpuqos-preempt.so")
    rc, f, err, _ = run(["--class", "be"] + PROBE, env, exe)
    want = os.path.realpath(os.path.join(d, "build/agent/preempt/libgpuqos-preempt.so"))
    check(rc == 0 and f.get("preload") == want, f"build layout: {f} {err}")
    # GPUQOS_PREEMPT_LIB wins over what lies next to the program.
    rc, f, err, _ = run(["--class", "be"] + PROBE, base_env(GPUQOS_PREEMPT_LIB=OTHER), exe)
    check(rc == 0 and f.get("preload") == os.path.realpath(OTHER), f"env first: {f} {err}")
    # Nothing beside the program: the library installed the way the docs
    # say (cmake --install, GPUQOS_INSTALL_LIBDIR) where this machine has
    # one; else warn, list where it looked, run anyway.
    exe = layout(os.path.join(d, "bare"), "bin/gpuqos", None)
    rc, f, err, _ = run(["--class", "be"] + PROBE, base_env(LD_PRELOAD=OTHER), exe)
    if "looked in:" in err:
        looked = err.split("looked in:", 1)[1].split(")")[0].split()
        check(rc == 0 and "warning" in err and len(looked) == 3 and f.get("preload") == OTHER
              and f.get("class") == "best-effort" and all(p.startswith(d) for p in looked[:2])
              and not os.path.exists(looked[2]), f"no library anywhere: {f} {err}")
    else:
        # Found outside the test's tree: only the installed library can be.
        libs = [p for p in f.get("preload", "").split(":") if p != OTHER]
        got = libs[0] if len(libs) == 1 else ""
        check(rc == 0 and "not found" not in err and OTHER in f.get("preload", "").split(":") and
              not got.startswith(os.path.realpath(d)) and os.path.isfile(got) and
              os.path.basename(got) == "libgpuqos-preempt.so" and
              f.get("class") == "best-effort", f"the installed library: {f} {err}")
        print(f"note: found the installed {got}")
    shutil.rmtree(d)


def t_exec():
    env = base_env(GPUQOS_PREEMPT_LIB=STUB)
    rc, _, err, _ = run(["--class", "lc", "--", "/bin/sh", "-c", "exit 7"], env)
    check(rc == 7, f"exit status not the command's: {rc} {err}")
    rc, _, err, _ = run(["--class", "lc", "--", "/nonexistent/cmd"], env)
    check(rc == 127 and "cannot run /nonexistent/cmd" in err, f"missing command: {rc} {err}")
    rc, _, err, _ = run(["--class", "lc", "--", "no-such-gpuqos-command"], env)
    check(rc == 127 and "No such file or directory" in err, f"not on PATH: {rc} {err}")
    d = tempfile.mkdtemp(prefix="gpuqos-run-")
    plain = os.path.join(d, "plain")
    with open(plain, "w") as fh:
        fh.write("echo should not run\n")
    os.chmod(plain, 0o644)
    rc, _, err, _ = run(["--class", "lc", "--", plain], env)
    check(rc == 126 and "Permission denied" in err, f"not executable: {rc} {err}")
    # `gpuqos ctl` becomes the gpuqosctl built next to it.
    p = subprocess.run([GPUQOS, "ctl", "--help"], env=env, capture_output=True, timeout=20)
    check(p.returncode == 0 and b"usage: gpuqosctl" in p.stdout, f"gpuqos ctl: {p}")
    exe = layout(d, "bin/gpuqos", None)
    p = subprocess.run([exe, "ctl", "list"], env=dict(env, PATH=d), capture_output=True,
                       timeout=20)
    check(p.returncode == 127 and b"cannot run gpuqosctl" in p.stderr, f"no gpuqosctl: {p}")
    shutil.rmtree(d)


def t_windows():
    """--windows: passed as GPUQOS_RUN_WINDOWS for an LC; anything the
    agent would refuse is refused here (exit 2, the value named) before
    the command runs; without it, none is inherited."""
    probe = ["/bin/sh", "-c", 'echo "class=$GPUQOS_RUN_CLASS"; '
             'echo "windows=${GPUQOS_RUN_WINDOWS-unset}"']
    env = base_env(GPUQOS_PREEMPT_LIB=STUB)
    for val in ("auto", "off", "800", "0", "100000"):
        rc, f, err, _ = run(["--class", "lc", "--windows", val, "--"] + probe, env)
        check(rc == 0 and f.get("class") == "latency-critical" and f.get("windows") == val,
              f"--windows {val}: rc {rc} {f} {err}")
    rc, f, err, _ = run(["--windows=auto", "--class=latency-critical"] + probe, env)
    check(rc == 0 and f.get("windows") == "auto", f"--windows=auto: {f} {err}")
    rc, f, err, _ = run(["--class", "lc", "--"] + probe, dict(env, GPUQOS_RUN_WINDOWS="auto"))
    check(rc == 0 and f.get("windows") == "unset", f"inherited GPUQOS_RUN_WINDOWS kept: {f}")

    d = tempfile.mkdtemp(prefix="gpuqos-run-")
    marker = os.path.join(d, "ran")
    touch = ["/bin/sh", "-c", f"touch {marker}"]
    for val in ("100001", "-1", "+800", " auto", "auto ", "auto\tx", "AUTO", "800us", "",
                "1e3", "0x10", "0000001", "auto\x7f"):
        rc, _, err, _ = run(["--class", "lc", "--windows", val, "--"] + touch, env)
        check(rc == 2, f"--windows {val!r}: rc {rc}, want 2")
        check("--windows" in err and f": {val}\n" in err, f"--windows {val!r}: not named in {err!r}")
        check(not os.path.exists(marker), f"--windows {val!r}: the command ran")
    rc, _, err, _ = run(["--class", "be", "--windows", "auto", "--"] + touch, env)
    check(rc == 2 and "--class lc" in err and not os.path.exists(marker),
          f"--windows with a BE: rc {rc} {err!r}")
    rc, _, err, _ = run(["--class", "lc", "--windows"], env)
    check(rc == 2 and "needs a value" in err, f"--windows without a value: rc {rc} {err!r}")
    shutil.rmtree(d)


GROUPS = {"env": t_env, "dedupe": t_dedupe, "bad_args": t_bad_args,
          "missing_lib": t_missing_lib, "lookup": t_lookup, "exec": t_exec,
          "windows": t_windows}


def main():
    global GPUQOS, STUB, OTHER
    if len(sys.argv) != 5 or (sys.argv[4] not in GROUPS and sys.argv[4] != "all"):
        sys.exit(__doc__)
    GPUQOS, STUB, OTHER = (os.path.abspath(a) for a in sys.argv[1:4])
    for name, fn in GROUPS.items():
        if sys.argv[4] in (name, "all"):
            fn()
    print("ok")


if __name__ == "__main__":
    run_main(main)
