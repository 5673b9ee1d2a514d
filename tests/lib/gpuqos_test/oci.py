# SPDX-License-Identifier: Apache-2.0
"""oci - runs a container the way a kubelet would, with crun.

Shared by tests/chart (the chart's DaemonSet containers, on a root made of
read-only binds of the host's /usr) and tests/image (the image's root
filesystem built by mmdebstrap). Builds an OCI bundle from a container's
command, environment, mounts and capabilities, and starts it with
`crun run` in a private mount namespace: on hosts with hybrid cgroups crun
refuses to start while the v2 `unified` tree is mounted, so that mount is
removed there, in the private namespace only. No pid or network namespace
(hostPID; the test API server listens on 127.0.0.1), no cgroup namespace
(the agent reads host cgroup paths in /proc/<pid>/cgroup).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

# In capability number order (linux/capability.h).
ALL_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
            "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
            "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
            "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
            "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
            "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
            "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
            "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND",
            "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"]

# crun in a private mount namespace, without the hybrid host's v2 mount.
WRAP = ("if mountpoint -q /sys/fs/cgroup/unified; then umount /sys/fs/cgroup/unified || exit 125; fi; "
        'exec crun "$@"')


def why_not():
    """None when containers can run here, else the reason."""
    if os.geteuid() != 0:
        return "needs root (crun, mounts)"
    for tool in ("crun", "unshare", "mountpoint"):
        if not shutil.which(tool):
            return "%s is not installed (scripts/install-deps.sh installs crun)" % tool
    return None


def expand(s, env):
    """Kubernetes' $(VAR) expansion in command and args; $$ escapes."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def capabilities(sc):
    """The capability set a Kubernetes securityContext gives a root
    container: privileged = all; else the runtime's defaults minus drop
    plus add (the chart always drops ALL)."""
    if sc.get("privileged"):
        # All this process may hand on (a sandboxed test host may lack some).
        with open("/proc/self/status") as f:
            bnd = int([line.split()[1] for line in f if line.startswith("CapBnd:")][0], 16)
        return [c for i, c in enumerate(ALL_CAPS) if bnd >> i & 1]
    caps = sc.get("capabilities", {})
    drop = set(caps.get("drop", []))
    if drop != {"ALL"}:
        raise ValueError("the test models only drop: [ALL], got %r" % sorted(drop))
    return sorted("CAP_" + c for c in caps.get("add", []))


def bind(src, dst, ro=False, propagation=None):
    opts = ["rbind", "ro" if ro else "rw"]
    if propagation:
        opts.append(propagation)
    return {"destination": dst, "type": "bind", "source": src, "options": opts}


def host_root_mounts():
    """A root of read-only binds of the host's system folders (merged /usr:
    /bin, /lib... are links into /usr)."""
    mounts, links = [], {}
    for d in ("usr", "bin", "sbin", "lib", "lib64", "etc"):
        p = "/" + d
        if os.path.islink(p):
            links[d] = os.readlink(p)
        elif os.path.isdir(p):
            mounts.append(bind(p, p, ro=True))
    return mounts, links


class Container:
    """One container: call start(), then wait()/stop(); log in self.log."""

    def __init__(self, workdir, name, args, env, mounts, caps, rootfs=None, links=None,
                 readonly=True, no_new_privs=True, sys_ro=True, tmp=True):
        self.id = "%s-%d" % (name, os.getpid())
        self.bundle = os.path.join(workdir, "bundle-" + name)
        self.log = os.path.join(workdir, name + ".log")
        os.makedirs(self.bundle, exist_ok=True)
        root = rootfs or os.path.join(self.bundle, "rootfs")
        os.makedirs(root, exist_ok=True)
        for d, target in (links or {}).items():
            p = os.path.join(root, d)
            if not os.path.lexists(p):
                os.symlink(target, p)
        for m in mounts:
            # crun makes missing mount points, but not on a read-only root.
            p = os.path.join(root, m["destination"].lstrip("/"))
            if not os.path.lexists(p):
                if m["type"] == "bind" and os.path.isfile(m["source"]):
                    os.makedirs(os.path.dirname(p), exist_ok=True)
                    open(p, "a").close()
                else:
                    os.makedirs(p, exist_ok=True)
        base = [{"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
                {"destination": "/sys", "type": "sysfs", "source": "sysfs",
                 "options": ["nosuid", "noexec", "nodev"] + (["ro"] if sys_ro else [])},
                {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["mode=1777"]}]
        if not tmp:  # a pod gets no /tmp of its own: a read-only root leaves it read only
            base = base[:-1]
        for m in base:
            os.makedirs(os.path.join(root, m["destination"].lstrip("/")), exist_ok=True)
        cfg = {
            "ociVersion": "1.0.2",
            "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
                        "env": ["%s=%s" % kv for kv in env.items()], "cwd": "/",
                        "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
                        "noNewPrivileges": no_new_privs},
            "root": {"path": root, "readonly": readonly},
            "hostname": name,
            "mounts": base + mounts,
            "linux": {"namespaces": [{"type": "mount"}, {"type": "ipc"}, {"type": "uts"}],
                      "maskedPaths": [], "readonlyPaths": []},
        }
        self.cfg = cfg
        self.write()
        self.proc = None

    def write(self):
        with open(os.path.join(self.bundle, "config.json"), "w") as f:
            json.dump(self.cfg, f, indent=1)

    def env_extra(self, key, value):
        """Adds what the test stands in for (not the spec's) to the env."""
        self.cfg["process"]["env"].append("%s=%s" % (key, value))
        self.write()

    def start(self):
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", WRAP, "crun",
               "--cgroup-manager=disabled", "run", "--no-pivot", "-b", self.bundle, self.id]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT)
        return self

    def run(self, timeout):
        """Runs to completion: (exit status, log text)."""
        self.start()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            rc = None
        return rc, self.text()

    def text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return "(not started)"

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def init_pid(self):
        """The container's first process, a host pid (no pid namespace), or None."""
        r = subprocess.run(["crun", "state", self.id], capture_output=True, text=True)
        try:
            return int(json.loads(r.stdout)["pid"])
        except (ValueError, KeyError, TypeError):
            return None

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # Without a pid namespace what its first process started in the
            # background outlives it (and holds the simulator's files open):
            # end its process group with it.
            pid = self.init_pid()
            try:
                if pid and pid > 1 and os.getpgid(pid) == pid and pid != os.getpgid(0):
                    os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            subprocess.run(["crun", "kill", self.id, "KILL"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        subprocess.run(["crun", "delete", "--force", self.id], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def close_after(close):
    """close(), from a finally block: when a failure is already in flight it
    is the one to report, and a failure of closing after it (a simulator a
    stuck workload still holds) is only printed."""
    pending = sys.exc_info()[0] is not None
    try:
        close()
    except Exception as e:
        if not pending:
            raise
        print("also, while closing: %s" % e)
