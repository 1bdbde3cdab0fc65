//! Cgroup v2: where the hierarchy is mounted, the cgroup a process is in,
//! the threads of a cgroup tree, and which container or service a cgroup
//! path names ([`container`]).
//!
//! Selection by cgroup (`record --cgroup`, `--unit`, `--container`) needs
//! the unified (v2) hierarchy: the kernel answers "is this task in this
//! cgroup or below it" only there. Most current distributions mount it
//! alone at `/sys/fs/cgroup`; hybrid hosts mount it beside the v1
//! controllers (systemd's `/sys/fs/cgroup/unified`). It is found from the
//! mount table, never assumed. A cgroup is named by its path from the
//! hierarchy's root (`/system.slice/nginx.service`), as `/proc/PID/cgroup`
//! shows it on its `0::` line.

pub mod container;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use container::{Container, Runtime};

/// Why a cgroup could not be selected or read.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No cgroup v2 hierarchy is mounted.
    #[error(
        "no cgroup v2 hierarchy is mounted (none in /proc/self/mountinfo): selecting by cgroup \
         needs one (mount -t cgroup2 none /sys/fs/cgroup/unified, or boot with \
         systemd.unified_cgroup_hierarchy=1)"
    )]
    NoHierarchy,
    /// The path is on a cgroup v1 hierarchy.
    #[error(
        "{path} is on a cgroup v1 hierarchy: selecting by cgroup needs cgroup v2 (the v2 \
         hierarchy here is {root}; name the cgroup relative to it)"
    )]
    V1 {
        /// The path given.
        path: String,
        /// Where the v2 hierarchy is.
        root: PathBuf,
    },
    /// No such cgroup.
    #[error("no cgroup {path} under the cgroup v2 hierarchy at {root}")]
    NoSuchCgroup {
        /// The path given.
        path: String,
        /// Where the v2 hierarchy is.
        root: PathBuf,
    },
    /// A path that leaves the hierarchy (`..`) or is not valid.
    #[error("{path:?} is not a cgroup path (no `..`, no empty name)")]
    BadPath {
        /// The path given.
        path: String,
    },
    /// Too many cgroups selected.
    #[error("{count} cgroups selected; at most {max} can be")]
    TooMany {
        /// How many were selected.
        count: usize,
        /// The most a recording takes.
        max: usize,
    },
    /// Reading the hierarchy failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

/// The mounted cgroup v2 hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    root: PathBuf,
}

impl Hierarchy {
    /// The cgroup v2 hierarchy this process sees, from its mount table.
    pub fn find() -> Result<Hierarchy, CgroupError> {
        let table =
            fs::read_to_string("/proc/self/mountinfo").map_err(|source| CgroupError::Io {
                path: "/proc/self/mountinfo".into(),
                source,
            })?;
        Self::in_mountinfo(&table).ok_or(CgroupError::NoHierarchy)
    }

    /// The cgroup v2 mount in a `mountinfo` table: the one whose root is
    /// the hierarchy's root (a bind mount of a subtree would name cgroups
    /// wrongly), the first of several.
    fn in_mountinfo(table: &str) -> Option<Hierarchy> {
        table.lines().find_map(|line| {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mut fields = left.split_whitespace();
            let root = fields.nth(3)?;
            let mount = fields.next()?;
            (fstype == "cgroup2" && root == "/").then(|| Hierarchy {
                root: PathBuf::from(unescape_mount(mount)),
            })
        })
    }

    /// A hierarchy mounted at `root` (tests, a known host layout).
    pub fn at(root: impl Into<PathBuf>) -> Hierarchy {
        Hierarchy { root: root.into() }
    }

    /// Where the hierarchy is mounted.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cgroup `path` names, as a path from the hierarchy's root
    /// (`/a/b`; `/` is the root itself): an absolute path under the mount
    /// point, or a path relative to the hierarchy (with or without a
    /// leading `/`). It must exist.
    pub fn resolve(&self, path: &str) -> Result<String, CgroupError> {
        let given = Path::new(path);
        let relative = if let Ok(rest) = given.strip_prefix(&self.root) {
            rest.to_path_buf()
        } else if given.is_absolute() && given.exists() && !self.dir_of(path).exists() {
            // An existing directory elsewhere: a v1 hierarchy's, or not a
            // cgroup at all.
            let v1 = nix::sys::statfs::statfs(given)
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP_SUPER_MAGIC);
            return Err(if v1 {
                CgroupError::V1 {
                    path: path.to_owned(),
                    root: self.root.clone(),
                }
            } else {
                CgroupError::NoSuchCgroup {
                    path: path.to_owned(),
                    root: self.root.clone(),
                }
            });
        } else {
            PathBuf::from(path.trim_start_matches('/'))
        };
        let mut name = String::new();
        for part in relative.components() {
            match part {
                std::path::Component::Normal(p) => {
                    name.push('/');
                    name.push_str(&p.to_string_lossy());
                }
                std::path::Component::CurDir => {}
                _ => {
                    return Err(CgroupError::BadPath {
                        path: path.to_owned(),
                    });
                }
            }
        }
        if name.is_empty() {
            name.push('/');
        }
        if !self.dir(&name).join("cgroup.procs").exists() {
            return Err(CgroupError::NoSuchCgroup {
                path: path.to_owned(),
                root: self.root.clone(),
            });
        }
        Ok(name)
    }

    /// The directory of cgroup `path` (from the hierarchy's root).
    pub fn dir(&self, path: &str) -> PathBuf {
        self.dir_of(path)
    }

    fn dir_of(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Every thread in cgroup `path` and the cgroups below it, now.
    /// Cgroups removed while being read are skipped.
    pub fn threads(&self, path: &str) -> Vec<u32> {
        self.members(path, "cgroup.threads")
    }

    /// Every process in cgroup `path` and the cgroups below it, now.
    pub fn processes(&self, path: &str) -> Vec<u32> {
        self.members(path, "cgroup.procs")
    }

    /// The ids listed in file `list` of cgroup `path` and of every cgroup
    /// below it.
    fn members(&self, path: &str, list: &str) -> Vec<u32> {
        let mut tids = Vec::new();
        let mut stack = vec![self.dir(path)];
        while let Some(dir) = stack.pop() {
            if let Ok(list) = fs::read_to_string(dir.join(list)) {
                tids.extend(list.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            }
            if let Ok(entries) = fs::read_dir(&dir) {
                stack.extend(
                    entries
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
        }
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// Every cgroup in the hierarchy, as paths from its root, the root
    /// first.
    pub fn all(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![String::from("/")];
        while let Some(path) = stack.pop() {
            if let Ok(entries) = fs::read_dir(self.dir(&path)) {
                for e in entries.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        let name = e.file_name();
                        let child = if path == "/" {
                            format!("/{}", name.to_string_lossy())
                        } else {
                            format!("{path}/{}", name.to_string_lossy())
                        };
                        stack.push(child);
                    }
                }
            }
            out.push(path);
        }
        out
    }
}

/// Undoes the octal escapes (`\040` for a space) of a `mountinfo` path.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 path of process (or thread) `pid`, from its
/// `/proc/PID/cgroup` (the `0::` line), as this process's cgroup namespace
/// shows it; `None` when the process is gone or has none.
pub fn of_process(pid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    v2_line(&text).map(str::to_owned)
}

/// The path on the `0::` line of a `/proc/PID/cgroup` text.
fn v2_line(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Whether cgroup `path` is `selected` or below it.
pub fn within(path: &str, selected: &str) -> bool {
    selected == "/"
        || path == selected
        || path
            .strip_prefix(selected)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The ids of process (or thread) `pid` in each PID namespace it is in,
/// this process's namespace first and its own innermost last (the `NSpid`
/// line of its status); empty when the process is gone.
pub fn ns_pids(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .as_deref()
        .map(parse_nspid)
        .unwrap_or_default()
}

/// The ids of an `NSpid:` line of a status text.
fn parse_nspid(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| {
            ids.split_whitespace()
                .filter_map(|i| i.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What a trace says about a process besides its name: its cgroup, the
/// container that cgroup belongs to, and its id in its own PID namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessLabels {
    /// Its cgroup v2 path (empty when unknown).
    pub cgroup: String,
    /// The container its cgroup belongs to, if any.
    pub container: Option<Container>,
    /// Its id in its innermost PID namespace, when that is not the host's.
    pub ns_pid: Option<u32>,
}

impl ProcessLabels {
    /// The labels of process `pid` now; `None` when it is gone.
    pub fn of(pid: u32) -> Option<ProcessLabels> {
        Some(Self::placed(pid, of_process(pid)?, |c| {
            container::name_of(c.runtime, &c.id)
        }))
    }

    /// The labels of process `pid` in cgroup `cgroup` (empty: unknown),
    /// its container's name given by `name` when the cgroup says none.
    pub fn placed(
        pid: u32,
        cgroup: String,
        name: impl FnOnce(&Container) -> Option<String>,
    ) -> ProcessLabels {
        let ids = ns_pids(pid);
        let ns_pid = (ids.len() > 1).then(|| ids.last().copied()).flatten();
        let container = Container::of_cgroup(&cgroup).map(|mut c| {
            c.name = c.name.take().or_else(|| name(&c));
            c
        });
        ProcessLabels {
            cgroup,
            container,
            ns_pid,
        }
    }

    /// Whether there is anything to say beyond the root cgroup.
    pub fn is_empty(&self) -> bool {
        (self.cgroup.is_empty() || self.cgroup == "/")
            && self.container.is_none()
            && self.ns_pid.is_none()
    }
}

/// The threads of process `pid` as its own PID namespace numbers them,
/// mapped to this namespace's ids: `(innermost id, id here)` for each
/// thread now.
pub fn thread_ids_in_namespace(pid: u32) -> Vec<(u32, u32)> {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|tid| {
            let status = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
            let ids = parse_nspid(&status);
            Some((*ids.last()?, tid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v2_mount_in_a_hybrid_and_a_unified_table() {
        let hybrid = "\
25 1 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
";
        assert_eq!(
            Hierarchy::in_mountinfo(hybrid).unwrap().root(),
            Path::new("/sys/fs/cgroup/unified")
        );
        let unified = "\
30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw
31 30 0:26 /system.slice /mnt/sub rw - cgroup2 cgroup2 rw
";
        assert_eq!(
            Hierarchy::in_mountinfo(unified).unwrap().root(),
            Path::new("/sys/fs/cgroup")
        );
        let v1_only = "27 25 0:24 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert!(Hierarchy::in_mountinfo(v1_only).is_none());
        assert_eq!(unescape_mount("/a\\040b"), "/a b");
    }

    #[test]
    fn within_means_the_cgroup_or_below() {
        assert!(within("/a/b", "/a"));
        assert!(within("/a", "/a"));
        assert!(!within("/ab", "/a"));
        assert!(within("/anything", "/"));
        assert!(!within("/", "/a"));
    }

    #[test]
    fn reads_the_v2_line_and_nspid() {
        assert_eq!(
            v2_line("4:memory:/x\n0::/system.slice/a.service\n"),
            Some("/system.slice/a.service")
        );
        assert_eq!(
            parse_nspid("Name:\tx\nNSpid:\t4242\t7\t1\n"),
            vec![4242, 7, 1]
        );
        assert!(parse_nspid("Name:\tx\n").is_empty());
    }

    #[test]
    fn resolves_paths_against_the_mount() {
        let Ok(h) = Hierarchy::find() else {
            return;
        };
        assert_eq!(h.resolve("/").unwrap(), "/");
        let abs = h.root().to_string_lossy().into_owned();
        assert_eq!(h.resolve(&abs).unwrap(), "/");
        assert!(matches!(
            h.resolve("no-such-cgroup-here"),
            Err(CgroupError::NoSuchCgroup { .. })
        ));
        assert!(matches!(
            h.resolve("a/../b"),
            Err(CgroupError::BadPath { .. })
        ));
        assert!(matches!(
            h.resolve("/usr"),
            Err(CgroupError::NoSuchCgroup { .. })
        ));
        if Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists() {
            // A hybrid host's v1 controller.
            assert!(matches!(
                h.resolve("/sys/fs/cgroup/memory"),
                Err(CgroupError::V1 { .. })
            ));
        }
        // This process is somewhere in it.
        let mine = of_process(std::process::id()).unwrap();
        assert!(h.resolve(&mine).is_ok());
    }
}
