# SPDX-License-Identifier: Apache-2.0
"""A new user's first hour with the command-line tools: versions, bad
option values, the config file named at start, `gpuqos run` without a node
agent, the device plugin's config syntax errors, pids, the default layout
of sockets and state, and an installed tree.

usage: test_first_hour.py GROUP
GROUP: version | bad_values | agent_config | run_no_agent | plugin_json |
       ctl_pid | layout | installed | all

The programs come from the environment: GPUQOS_AGENT_BIN, GPUQOS_CTL_BIN,
GPUQOS_BIN, GPUQOS_PLUGIN_BIN (optional: its cases are skipped without it),
and for `installed` GPUQOS_BUILD_DIR and GPUQOS_CMAKE. Every agent started
here gets scratch paths, so nothing under /run is made.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from gpuqos_test import Failure, Skip, check, run_main, wait_for

AGENT = os.environ.get("GPUQOS_AGENT_BIN")
CTL = os.environ.get("GPUQOS_CTL_BIN")
GPUQOS = os.environ.get("GPUQOS_BIN")
PLUGIN = os.environ.get("GPUQOS_PLUGIN_BIN") or None
VERSION_OF = {"gpuqos-agent": AGENT, "gpuqosctl": CTL, "gpuqos": GPUQOS,
              "gpuqos-device-plugin": PLUGIN}
PROBE = ["/bin/sh", "-c", 'echo "ran class=$GPUQOS_RUN_CLASS preload=$LD_PRELOAD"']


def clean_env(**kw):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("GPUQOS_") and k not in ("LD_PRELOAD", "NODE_NAME", "KUBECONFIG")}
    e["ASAN_OPTIONS"] = "verify_asan_link_order=0:" + e.get("ASAN_OPTIONS", "")
    e.update(kw)
    return e


def run(argv, env=None, timeout=30):
    """Runs argv to its end; a program still running after timeout is
    killed and reported (a refused start must not turn into a running
    one)."""
    p = subprocess.Popen(argv, env=env or clean_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise Failure(f"{argv}: still running after {timeout} s; stderr:\n"
                      f"{err.decode(errors='replace')[-1500:]}")
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    check("Sanitizer" not in err and "runtime error" not in err, f"{argv}: sanitizer:\n{err}")
    return p.returncode, out, err


class Scratch:
    """A directory for one case's files; the agent's paths all inside it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpuqos-first-hour-")

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def agent_paths(self, bpf=True):
        nv = self.path("nvidiactl")
        open(nv, "a").close()
        return ["--socket", self.path("run", "agent.sock"), "--ctl-socket",
                self.path("agent", "ctl.sock"), "--state-dir", self.path("agent"),
                "--nvidiactl", nv, "--metrics-address", "off"] + (["--bpf", "off"] if bpf else [])

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def t_version():
    """Every tool says its version the same way, on stdout, exit 0."""
    seen = {}
    for name, exe in VERSION_OF.items():
        if exe is None:
            print(f"note: no {name}; its --version is not checked")
            continue
        forms = (["version"], ["--version"]) if name == "gpuqos" else (["--version"],)
        for a in forms:
            rc, out, err = run([exe] + a)
            words = out.split()
            check(rc == 0 and len(words) == 2 and words[0] == name and err == "",
                  f"{name} {a}: rc {rc}, stdout {out!r}, stderr {err!r}")
            seen[name] = words[1]
    check(len(set(seen.values())) == 1, f"the tools disagree on the version: {seen}")


def expect_usage_error(argv, named, env=None, prog=None):
    """A bad value: exit 2, nothing on stdout, one line naming it (plus at
    most a hint to --help), never the whole usage."""
    rc, out, err = run(argv, env=env)
    lines = err.strip().splitlines()
    what = f"{argv} (env {({k: v for k, v in (env or {}).items() if k.startswith('GPUQOS_')})})"
    check(rc == 2, f"{what}: rc {rc}, want 2; stderr {err!r}")
    check(out == "", f"{what}: stdout {out!r}")
    check(1 <= len(lines) <= 2, f"{what}: want one line (and a hint), got {err!r}")
    check(named in lines[0], f"{what}: {named!r} not named in {lines[0]!r}")
    if prog:
        check(lines[0].startswith(prog + ":"), f"{what}: not said by {prog}: {lines[0]!r}")
    if len(lines) == 2:
        check("--help" in lines[1], f"{what}: second line is not a hint to --help: {lines[1]!r}")
    check("usage:" not in err, f"{what}: the whole usage was printed: {err!r}")
    return lines[0]


def t_bad_values():
    s = Scratch()
    try:
        base = [AGENT, "--standalone"] + s.agent_paths()
        first = expect_usage_error(base + ["--log-level", "loud"], "'loud'", prog="gpuqos-agent")
        check(first == "gpuqos-agent: --log-level: 'loud' is not one of error, warn, info, debug",
              f"--log-level loud: {first!r}")
        expect_usage_error(base + ["--log-level=LOUD"], "'LOUD'")
        line = expect_usage_error(base, "'loud'", env=clean_env(GPUQOS_LOG_LEVEL="loud"))
        check("GPUQOS_LOG_LEVEL" in line, f"the variable is not named: {line!r}")
        line = expect_usage_error(base + ["--bpf", "maybe"], "'maybe'")
        check("--bpf" in line and "auto" in line, f"--bpf maybe: {line!r}")
        line = expect_usage_error([AGENT, "--standalone"] + s.agent_paths(bpf=False), "'maybe'",
                                  env=clean_env(GPUQOS_BPF="maybe"))
        check("GPUQOS_BPF" in line, f"GPUQOS_BPF=maybe: {line!r}")
        expect_usage_error(base + ["--bogus"], "--bogus")
        expect_usage_error(base + ["-q"], "-q")
        expect_usage_error(base + ["--log-level"], "--log-level")
        expect_usage_error(base + ["--standalone=yes"], "--standalone=yes")
        expect_usage_error(base + ["stray"], "stray")
        check(not os.path.exists(s.path("agent")) and not os.path.exists(s.path("run")),
              "a refused agent made its directories")

        expect_usage_error([CTL, "--timeout-ms", "soon", "list"], "'soon'", prog="gpuqosctl")
        expect_usage_error([CTL, "set-class", "1", "fast"], "'fast'")
        expect_usage_error([CTL, "--bogus", "list"], "--bogus")
        expect_usage_error([CTL, "frobnicate"], "frobnicate")

        touch = ["/bin/sh", "-c", "touch " + s.path("ran")]
        expect_usage_error([GPUQOS, "run", "--class", "fast", "--"] + touch, "fast",
                           prog="gpuqos")
        expect_usage_error([GPUQOS, "run", "--clas", "lc", "--"] + touch, "--clas")
        expect_usage_error([GPUQOS, "frob"], "frob")
        check(not os.path.exists(s.path("ran")), "gpuqos ran the command despite a usage error")

        if PLUGIN:
            for args, env, named in ((["--log-level", "loud"], None, "loud"),
                                     (["--mode", "sideways"], None, "sideways"),
                                     ([], {"GPUQOS_PLUGIN_MODE": "sideways"}, "sideways"),
                                     (["--node-agent-socket-dir", "rel/dir"], None, "rel/dir"),
                                     (["--metrics-address", "nowhere"], None, "nowhere"),
                                     (["--bogus"], None, "--bogus")):
                expect_usage_error([PLUGIN, "--device-plugin-dir", s.path("dp")] + args, named,
                                   env=clean_env(**(env or {})), prog="gpuqos-device-plugin")
        else:
            print("note: no gpuqos-device-plugin; its options are not checked")
    finally:
        s.close()


def refused_start(argv, env, want, what):
    rc, out, err = run(argv, env=env)
    check(rc != 0, f"{what}: started anyway (rc {rc})")
    for w in want:
        check(w in err, f"{what}: {w!r} not in stderr:\n{err[-1500:]}")
    return err


def t_agent_config():
    """A config file named at start must be there and valid; none named
    means the defaults."""
    s = Scratch()
    try:
        paths = s.agent_paths()
        missing = s.path("no-such-policy.json")
        base = [AGENT, "--standalone"] + paths
        refused_start(base + ["--config", missing], None, [missing, "No such file or directory"],
                      "--config naming a missing file")
        refused_start(base, clean_env(GPUQOS_CONFIG=missing),
                      [missing, "No such file or directory"], "GPUQOS_CONFIG naming a missing file")
        os.mkdir(s.path("a-dir"))
        refused_start(base + ["--config", s.path("a-dir")], None,
                      [s.path("a-dir"), "not a regular file"], "--config naming a directory")
        bad = s.path("bad.json")
        with open(bad, "w") as f:
            f.write('{"version": 1,\n  "defaultClass": "best-effort",,\n}\n')
        refused_start(base + ["--config", bad], None, [bad, "line 2, column"],
                      "--config with a syntax error")
        check(not os.path.exists(s.path("run", "agent.sock")) and
              not os.path.exists(s.path("agent", "ctl.sock")), "a refused agent made a socket")
        # No config named: the defaults, and the agent runs.
        ctl = s.path("agent", "ctl.sock")
        log = open(s.path("agent.log"), "wb")
        p = subprocess.Popen(base, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: os.path.exists(ctl) or p.poll() is not None, "the ctl socket", 30)
            check(p.poll() is None, f"no config named: the agent exited {p.returncode}")
            rc, out, err = run([CTL, "--socket", ctl, "status"])
            check(rc == 0, f"status without a config: rc {rc} {err}")
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
            log.close()
    finally:
        s.close()


def seqpacket_listener(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.listen(8)
    s.setblocking(False)
    return s


def run_workload(args, env):
    rc, out, err = run([GPUQOS, "run"] + args, env=env)
    return rc, out, err


def t_run_no_agent():
    """`gpuqos run` fails open without a node agent, says so once on
    stderr, and leaves stdout to the program."""
    s = Scratch()
    try:
        missing = s.path("none", "agent.sock")
        for args, env, path in (
                (["--class", "lc", "--socket", missing, "--"], clean_env(), missing),
                (["--class", "lc", "--"], clean_env(GPUQOS_SOCKET=missing), missing)):
            rc, out, err = run_workload(args + PROBE, env)
            check(rc == 0 and out.startswith("ran class=latency-critical"),
                  f"{args}: the program did not run as it would have: rc {rc}, stdout {out!r}")
            lines = err.strip().splitlines()
            check(len(lines) == 1, f"{args}: want one line on stderr, got {err!r}")
            check("without QoS" in lines[0] and path in lines[0] and
                  "not reachable" in lines[0] and "No such file or directory" in lines[0] and
                  "gpuqos-agent --standalone" in lines[0], f"{args}: {lines[0]!r}")
        # Without a library either: both said, the agent's once, and it runs.
        rc, out, err = run_workload(["--class", "be", "--socket", missing, "--"] + PROBE,
                                    clean_env(GPUQOS_PREEMPT_LIB=s.path("nolib.so")))
        check(rc == 0 and out == "ran class=best-effort preload=\n", f"no library: {rc} {out!r}")
        check(err.count("not reachable") == 1 and "nolib.so" in err, f"no library: {err!r}")
        # The exit status stays the program's.
        rc, out, err = run_workload(["--class", "be", "--socket", missing, "--", "/bin/sh", "-c",
                                     "exit 5"], clean_env())
        check(rc == 5, f"exit status not the program's: {rc} {err!r}")
        # A live node agent socket: silent, and it never sees the check.
        live = s.path("live.sock")
        lst = seqpacket_listener(live)
        try:
            rc, out, err = run_workload(["--class", "lc", "--socket", live, "--"] + PROBE,
                                        clean_env())
            check(rc == 0 and out.startswith("ran class=") and err == "",
                  f"live socket: rc {rc} stdout {out!r} stderr {err!r}")
            try:
                c, _ = lst.accept()
                c.close()
                raise Failure("the reachability check opened a connection to the node agent")
            except BlockingIOError:
                pass
        finally:
            lst.close()
        # The socket file of an agent that is gone: nobody bound to it.
        rc, out, err = run_workload(["--class", "lc", "--socket", live, "--"] + PROBE, clean_env())
        check(rc == 0 and out.startswith("ran class=") and err.count("\n") == 1 and
              "Connection refused" in err and live in err, f"stale socket: {rc} {out!r} {err!r}")
    finally:
        s.close()


def t_plugin_json():
    if not PLUGIN:
        raise Skip("no gpuqos-device-plugin")
    s = Scratch()
    try:
        cases = (
            # Where cJSON stopped (on or just after the fault), and the
            # text around it.
            ('{"version": 1,\n  "mode": "shares",,\n  "replicas": 2\n}\n',
             ["JSON syntax error at line 2, column 2", "(byte 3", '"shares",,']),
            ('{"version": 1, "mode": shares}', ["JSON syntax error at line 1, column 2",
                                                  "shares}"]),
            ('{"version": 1,', ["JSON syntax error", "line 1"]),
            ("", ["JSON syntax error", "empty"]),
            ("[1, 2]", ["one JSON object", "an array"]),
        )
        for i, (text, want) in enumerate(cases):
            path = s.path(f"plugin-{i}.json")
            with open(path, "w") as f:
                f.write(text)
            rc, out, err = run([PLUGIN, "--config", path, "--device-plugin-dir", s.path("dp")])
            check(rc == 2 and out == "", f"{text!r}: rc {rc} stdout {out!r}")
            check(path in err, f"{text!r}: the file is not named: {err!r}")
            check("not a JSON object" not in err or "an array" in err,
                  f"{text!r}: a syntax error called 'not a JSON object': {err!r}")
            for w in want:
                check(w in err, f"{text!r}: {w!r} not in {err!r}")
            check(len(err.strip().splitlines()) == 1, f"{text!r}: one line: {err!r}")
    finally:
        s.close()


def t_ctl_pid():
    """A pid that is not one is refused as such, before anything is sent."""
    s = Scratch()
    try:
        sock = s.path("ctl.sock")  # nothing listens: a request would say "cannot connect"
        for args, bad in ((["show", "-5"], "-5"), (["show", "0"], "0"), (["show", "abc"], "abc"),
                          (["set-class", "-5", "be"], "-5"), (["preempt", "-12"], "-12"),
                          (["get-timeslice", "-0"], "-0"), (["--json", "show", "-5"], "-5"),
                          (["show", "-", ], "-")):
            line = expect_usage_error([CTL, "--socket", sock] + args, "not a pid: " + bad,
                                      prog="gpuqosctl")
            check("unknown option" not in line, f"{args}: {line!r}")
        # An option that is one is still an option.
        expect_usage_error([CTL, "--socket", sock, "show", "-x"], "unknown option '-x'")
    finally:
        s.close()


def help_of(argv):
    rc, out, err = run(argv)
    check(rc == 0, f"{argv}: rc {rc} {err}")
    return out


def default_in(text, flag):
    """The default a help text gives for flag: the absolute path after it."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip().startswith(flag + " "):
            chunk = " ".join(lines[i:i + 4])
            for word in chunk.replace("(", " ").replace(")", " ").replace(",", " ").split():
                if word.startswith("/"):
                    return word
    raise Failure(f"no default for {flag} in:\n{text}")


def t_layout():
    """The built-in layout without flags: the preempt socket alone in the
    directory the plugin mounts into containers, the control socket and
    state elsewhere, and every tool agreeing on it."""
    agent = help_of([AGENT, "--help"])
    sock = default_in(agent, "--socket")
    ctl = default_in(agent, "--ctl-socket")
    state = default_in(agent, "--state-dir")
    check(sock == "/run/gpuqos/agent.sock", f"agent socket default {sock}")
    check(state == "/run/gpuqos-agent" and ctl == "/run/gpuqos-agent/ctl.sock",
          f"agent defaults: --ctl-socket {ctl} --state-dir {state}")
    mounted = os.path.dirname(sock)
    for p in (ctl, state):
        check(not (p + "/").startswith(mounted + "/"), f"{p} is inside {mounted}")
    ctl_default = default_in(help_of([CTL, "--help"]), "--socket")
    check(ctl_default == ctl, f"gpuqosctl's default {ctl_default} is not the agent's {ctl}")
    run_default = default_in(help_of([GPUQOS, "--help"]), "--socket")
    check(run_default == sock, f"gpuqos run's default {run_default} is not the agent's {sock}")
    if PLUGIN:
        mount = default_in(help_of([PLUGIN, "--help"]), "--node-agent-socket-dir")
        check(mount == mounted, f"the plugin mounts {mount}, the agent's socket is in {mounted}")

    s = Scratch()
    try:
        nv = s.path("nvidiactl")
        open(nv, "a").close()
        kube = [AGENT, "--node-name", "n1", "--kubeconfig", s.path("no-kubeconfig"),
                "--bpf", "off", "--metrics-address", "off", "--nvidiactl", nv]
        existed = os.path.exists(mounted)
        # Kubernetes mode: the control socket or the state in the mounted
        # directory is refused, before anything is made.
        for extra, what in (
                (["--socket", sock, "--ctl-socket", mounted + "/ctl.sock",
                  "--state-dir", s.path("state")], "the control socket"),
                (["--socket", sock, "--ctl-socket", s.path("ctl.sock"),
                  "--state-dir", mounted], "the state file"),
                (["--socket", mounted + "/./agent.sock", "--ctl-socket", s.path("ctl.sock"),
                  "--state-dir", mounted + "/sub/state"], "the state file")):
            err = refused_start(kube + extra, None, [what, mounted, "refusing"], f"kube {extra}")
            check("ERROR" in err.upper(), f"not an error: {err}")
        check(os.path.exists(mounted) == existed, f"a refused agent made {mounted}")
        check(not os.path.exists(s.path("state")), "a refused agent made its state dir")
        # Beside it is not inside it.
        rc, _, err = run(kube + ["--socket", s.path("run", "agent.sock"), "--ctl-socket",
                                 s.path("run-agent", "ctl.sock"), "--state-dir",
                                 s.path("run-agent")])
        check(rc == 1 and "refusing" not in err and
              "preempt socket's directory" not in err and s.path("no-kubeconfig") in err,
              f"a sibling directory: rc {rc}: {err[-800:]}")
        # The test set-ups' layout (tests/e2e: one scratch directory for
        # all) in Kubernetes mode: a warning, then on to the kubeconfig.
        rc, _, err = run(kube + ["--socket", s.path("e2e", "agent.sock"), "--ctl-socket",
                                 s.path("e2e", "ctl.sock"), "--state-dir", s.path("e2e", "state")])
        check(rc == 1 and "refusing" not in err and "preempt socket's directory" in err and
              s.path("no-kubeconfig") in err, f"a scratch directory: rc {rc}: {err[-800:]}")
        # Standalone with a scratch directory (the test set-ups' layout): a
        # warning, and it runs.
        base = [AGENT, "--standalone", "--bpf", "off", "--metrics-address", "off", "--nvidiactl",
                nv, "--socket", s.path("one", "agent.sock"), "--ctl-socket",
                s.path("one", "ctl.sock"), "--state-dir", s.path("one", "state")]
        log = s.path("standalone.log")
        with open(log, "wb") as f:
            p = subprocess.Popen(base, env=clean_env(), stdout=f, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: os.path.exists(s.path("one", "ctl.sock")) or p.poll() is not None,
                     "the ctl socket", 30)
            check(p.poll() is None, f"standalone, one directory: exited {p.returncode}")
            text = open(log).read()
            check("the control socket and the state file are in " + s.path("one") in text,
                  f"no warning about the layout:\n{text}")
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
    finally:
        s.close()


def t_installed():
    """`cmake --install`'s layout: <prefix>/bin/gpuqos finds
    <prefix>/lib/gpuqos/libgpuqos-preempt.so, also through a symlink."""
    build = os.environ.get("GPUQOS_BUILD_DIR")
    cmake = os.environ.get("GPUQOS_CMAKE", "cmake")
    check(build, "GPUQOS_BUILD_DIR is not set")
    s = Scratch()
    try:
        prefix = s.path("prefix")
        # Each folder's install script, as `cmake --install` runs them: the
        # tools and the preempt library only (the rest need not be built).
        for sub in ("agent/cli", "agent/preempt"):
            rc, out, err = run([cmake, "-DCMAKE_INSTALL_PREFIX=" + prefix, "-P",
                                os.path.join(build, sub, "cmake_install.cmake")], timeout=120)
            check(rc == 0, f"install {sub}: rc {rc}\n{out}\n{err}")
        lib = os.path.join(prefix, "lib", "gpuqos", "libgpuqos-preempt.so")
        exe = os.path.join(prefix, "bin", "gpuqos")
        check(os.path.isfile(lib) and os.access(exe, os.X_OK), f"installed tree: {os.listdir(prefix)}")
        link = s.path("elsewhere", "gpuqos")
        os.makedirs(os.path.dirname(link))
        os.symlink(exe, link)
        # The real library in /bin/sh: told to stay out of the way.
        env = clean_env(GPUQOS_PREEMPT_DISABLE="1", GPUQOS_SOCKET=s.path("none.sock"))
        for e in (exe, link):
            rc, out, err = run([e, "run", "--class", "be", "--"] + PROBE, env=env)
            check(rc == 0 and out == f"ran class=best-effort preload={os.path.realpath(lib)}\n",
                  f"{e}: the installed library was not found: rc {rc} {out!r} {err!r}")
            check("libgpuqos-preempt.so not found" not in err, f"{e}: {err!r}")
        rc, out, err = run([exe, "ctl", "--version"], env=clean_env(PATH="/nonexistent"))
        check(rc == 0 and out.startswith("gpuqosctl "), f"installed gpuqos ctl: {rc} {out!r} {err!r}")
    finally:
        s.close()


GROUPS = {"version": t_version, "bad_values": t_bad_values, "agent_config": t_agent_config,
          "run_no_agent": t_run_no_agent, "plugin_json": t_plugin_json, "ctl_pid": t_ctl_pid,
          "layout": t_layout, "installed": t_installed}


def main():
    if len(sys.argv) != 2 or (sys.argv[1] not in GROUPS and sys.argv[1] != "all"):
        sys.exit(__doc__)
    for name in ("GPUQOS_AGENT_BIN", "GPUQOS_CTL_BIN", "GPUQOS_BIN"):
        if not os.environ.get(name):
            sys.exit(f"{name} is not set")
    for name, fn in GROUPS.items():
        if sys.argv[1] in (name, "all"):
            fn()
    print("ok")


if __name__ == "__main__":
    run_main(main)
