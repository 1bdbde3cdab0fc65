//! Cgroups of a test's own under the cgroup v2 hierarchy.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The cgroup v2 mount point, from the mount table.
pub fn v2_root() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("the mount table");
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .expect("a cgroup v2 hierarchy is mounted")
}

/// A cgroup tree of the test's own under the v2 root, removed (its
/// processes killed first) when dropped.
pub struct Tree {
    /// Its directory.
    pub root: PathBuf,
    /// Its path from the hierarchy's root.
    pub name: String,
    children: Vec<Child>,
}

impl Tree {
    /// Makes `/NAME-PID` under the v2 root.
    pub fn new(name: &str) -> Tree {
        let name = format!("/{name}-{}", std::process::id());
        let root = v2_root().join(name.trim_start_matches('/'));
        let _ = std::fs::create_dir(&root);
        Tree {
            root,
            name,
            children: Vec::new(),
        }
    }

    /// Makes cgroup `sub` below the tree's root.
    pub fn cgroup(&self, sub: &str) -> PathBuf {
        let dir = self.root.join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Starts `program ARGS` inside cgroup `dir` (it moves itself there
    /// before it executes the program): returns its pid.
    pub fn start_in(&mut self, dir: Option<&Path>, program: &str, args: &[&str]) -> u32 {
        self.start_with(dir, program, args, &[])
    }

    /// [`Self::start_in`] with environment variables set.
    pub fn start_with(
        &mut self,
        dir: Option<&Path>,
        program: &str,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> u32 {
        let script = match dir {
            Some(d) => format!("echo $$ > {}/cgroup.procs && exec \"$@\"", d.display()),
            None => "exec \"$@\"".to_owned(),
        };
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script, "sh", program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let pid = child.id();
        self.children.push(child);
        pid
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Deepest first; a cgroup goes once its last task has.
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(d) = stack.pop() {
            if let Ok(entries) = std::fs::read_dir(&d) {
                stack.extend(
                    entries
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
