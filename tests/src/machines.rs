//! Machines for the tests of `record --host`: each a network namespace of
//! the test's own, reached over veth pairs, running a real sshd with keys
//! made for the test; and a user of the test's own, to reach one as.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{bin_dir, require_root, temp_dir, trace_cli};

/// One test of a binary at a time: each runs three recordings, sshds and
/// daemons, and the clock tests measure microseconds.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for the other tests of this binary that use machines to end.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Machines in network namespaces, each with an sshd; removed with every
/// process in them when dropped.
pub struct Machines {
    /// The test's directory: keys, configurations, sockets, logs.
    pub dir: PathBuf,
    /// Namespace names, in machine order.
    pub netns: Vec<String>,
    /// The root namespace's end of each machine's link.
    pub links: Vec<String>,
    sshd: Vec<Child>,
    /// Each machine's address.
    pub addrs: Vec<String>,
    /// The address of the second machine on the link between the two.
    pub peer_addr: String,
    /// `trace-cli` on the machines.
    pub remote_cli: PathBuf,
    /// Held until the machines are gone: one test of the file at a time.
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// `CMD ARGS`, which must succeed.
pub fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    run("ip", args);
}

impl Machines {
    /// Two machines, `a` and `b`, on subnets `10.NET.1.0/24` and
    /// `10.NET.2.0/24` from the root namespace, linked to each other on
    /// `10.NET.9.0/24`; the sshd of machine `b` gives its sessions
    /// `b_env`.
    pub fn new(name: &str, net: u8, b_env: &[(&str, String)]) -> Machines {
        require_root();
        let alone = alone();
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "sshd is missing: `cargo xtask setup` installs openssh-server"
        );
        let dir = temp_dir(name);
        let tag = format!("{}{}", std::process::id() % 100_000, &name[..1]);
        let mut m = Machines {
            dir: dir.clone(),
            netns: Vec::new(),
            links: Vec::new(),
            sshd: Vec::new(),
            addrs: Vec::new(),
            peer_addr: format!("10.{net}.9.2"),
            remote_cli: trace_cli(),
            _alone: alone,
        };
        std::fs::create_dir_all("/run/sshd").unwrap();
        let key = |n: &str| {
            let path = dir.join(n);
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(path.with_extension("pub"));
            run(
                "ssh-keygen",
                &[
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-f",
                    path.to_str().unwrap(),
                ],
            );
            path
        };
        let host_key = key("host_key");
        let client_key = key("client_key");
        std::fs::copy(
            client_key.with_extension("pub"),
            dir.join("authorized_keys"),
        )
        .unwrap();
        let host_pub = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
        let mut known = String::new();
        for (k, machine) in ["a", "b"].iter().enumerate() {
            let ns = format!("tr{tag}{machine}");
            let (outer, inner) = (format!("tr{tag}{machine}h"), format!("tr{tag}{machine}g"));
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
            let _ = Command::new("ip").args(["link", "del", &outer]).output();
            ip(&["netns", "add", &ns]);
            m.netns.push(ns.clone());
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ]);
            m.links.push(outer.clone());
            ip(&["link", "set", &inner, "netns", &ns]);
            let subnet = format!("10.{net}.{}", k + 1);
            ip(&["addr", "add", &format!("{subnet}.1/24"), "dev", &outer]);
            ip(&["link", "set", &outer, "up"]);
            let inside = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &ns, "ip"];
                all.extend_from_slice(args);
                ip(&all);
            };
            inside(&["addr", "add", &format!("{subnet}.2/24"), "dev", &inner]);
            inside(&["link", "set", &inner, "up"]);
            inside(&["link", "set", "lo", "up"]);
            m.addrs.push(format!("{subnet}.2"));
            known.push_str(&format!("{subnet}.2 {host_pub}"));
        }
        // The link between the two machines.
        let (ab, ba) = (format!("tr{tag}ab"), format!("tr{tag}ba"));
        ip(&[
            "link",
            "add",
            &ab,
            "netns",
            &m.netns[0],
            "type",
            "veth",
            "peer",
            "name",
            &ba,
            "netns",
            &m.netns[1],
        ]);
        for (ns, dev, addr) in [(&m.netns[0], &ab, "1"), (&m.netns[1], &ba, "2")] {
            ip(&[
                "netns",
                "exec",
                ns,
                "ip",
                "addr",
                "add",
                &format!("10.{net}.9.{addr}/24"),
                "dev",
                dev,
            ]);
            ip(&["netns", "exec", ns, "ip", "link", "set", dev, "up"]);
        }
        std::fs::write(dir.join("known_hosts"), known).unwrap();
        std::fs::write(
            dir.join("ssh_config"),
            format!(
                "Host *\n  User root\n  IdentityFile {}\n  UserKnownHostsFile {}\n  \
                 StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                client_key.display(),
                dir.join("known_hosts").display()
            ),
        )
        .unwrap();
        for (k, ns) in m.netns.clone().iter().enumerate() {
            let mut env = format!(
                "TRACE_MANAGER_SOCKET={}",
                dir.join(format!("manager-{k}.sock")).display()
            );
            if k == 1 {
                for (name, value) in b_env {
                    env.push_str(&format!(" {name}={value}"));
                }
            }
            let config = dir.join(format!("sshd-{k}.conf"));
            std::fs::write(
                &config,
                format!(
                    "ListenAddress {}:22\nHostKey {}\nAuthorizedKeysFile {}\n\
                     PasswordAuthentication no\nPermitRootLogin prohibit-password\n\
                     StrictModes no\nUsePAM no\nPidFile {}\nSetEnv {env}\n",
                    m.addrs[k],
                    host_key.display(),
                    dir.join("authorized_keys").display(),
                    dir.join(format!("sshd-{k}.pid")).display(),
                ),
            )
            .unwrap();
            // nsenter, not `ip netns exec`: that mounts a sysfs of the
            // namespace's own, without the cgroup and tracefs mounts a
            // machine's recording needs.
            let sshd = Command::new("nsenter")
                .arg(format!("--net=/run/netns/{ns}"))
                .args(["/usr/sbin/sshd", "-D", "-f"])
                .arg(&config)
                .arg("-E")
                .arg(dir.join(format!("sshd-{k}.log")))
                .spawn()
                .unwrap();
            m.sshd.push(sshd);
        }
        // Each sshd answers before the test goes on.
        for addr in &m.addrs {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let ok = Command::new("ssh")
                    .args([
                        "-F",
                        m.ssh_config().to_str().unwrap(),
                        "-o",
                        "BatchMode=yes",
                        addr,
                        "true",
                    ])
                    .stderr(Stdio::null())
                    .status()
                    .unwrap()
                    .success();
                if ok {
                    break;
                }
                assert!(Instant::now() < deadline, "sshd on {addr} does not answer");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        m
    }

    pub fn ssh_config(&self) -> PathBuf {
        self.dir.join("ssh_config")
    }

    /// `trace-cli COMMAND` on this machine (named `here`, its manager's
    /// socket `manager-local.sock`) and the machines of `hosts`, into
    /// `out`.
    pub fn cli(&self, command: &str, hosts: &Path, out: &Path) -> Command {
        let mut c = Command::new(trace_cli());
        c.arg(command)
            .arg("--hosts")
            .arg(hosts)
            .arg("--ssh")
            .arg(format!("ssh -F {}", self.ssh_config().display()))
            .arg("--remote-trace-cli")
            .arg(&self.remote_cli)
            .args(["--host-name", "here", "-o"])
            .arg(out)
            .env("TRACE_MANAGER_SOCKET", self.dir.join("manager-local.sock"));
        c
    }

    /// The processes in machine `k`'s namespace.
    pub fn pids(&self, k: usize) -> Vec<u32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.netns[k]])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Starts `tcp_pingpong ARGS` on machine `k`, inside cgroup `cgroup`;
    /// returns it with its first line's pid and tid.
    pub fn pingpong(&self, k: usize, cgroup: &Path, args: &[&str]) -> (Child, u64, u64) {
        let script = format!("echo $$ > {}/cgroup.procs && exec \"$@\"", cgroup.display());
        let mut child = Command::new("sh")
            .args(["-c", &script, "sh", "nsenter"])
            .arg(format!("--net=/run/netns/{}", self.netns[k]))
            .arg(bin_dir().join("tcp_pingpong"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut first)
            .unwrap();
        let n = crate::workload::numbers(&first);
        (child, n["pid"], n["tid"])
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        for k in 0..self.netns.len() {
            for pid in self.pids(k) {
                // SAFETY: kill() with a pid and a signal has no memory effects.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        for s in &mut self.sshd {
            let _ = s.kill();
            let _ = s.wait();
        }
        for ns in &self.netns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        for l in &self.links {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
    }
}

/// A user of the test's own, with a shell and no password (logged in by
/// key only), removed on drop.
pub struct User(pub String);

impl User {
    pub fn create() -> User {
        let name = format!("trhost{}", std::process::id() % 100_000);
        let _ = Command::new("userdel").arg(&name).output();
        // `*`, not the locked `!`: sshd without PAM refuses locked accounts.
        run(
            "useradd",
            &[
                "--no-create-home",
                "--shell",
                "/bin/sh",
                "--user-group",
                "--password",
                "*",
                &name,
            ],
        );
        User(name)
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).output();
    }
}
