//! The committed eBPF object: `trace-manager/ebpf/trace-ebpf.o`, with a
//! digest of the sources it was built from beside it
//! (`trace-ebpf.o.inputs`).
//!
//! Building the object needs the nightly toolchain with `rust-src` and
//! `bpf-linker`, which take minutes to install on a new machine. As Go
//! programs built with cilium/ebpf's `bpf2go` do, the object is kept in the
//! repository, so a user's first build needs only the stable toolchain.
//! [`current`] says whether the committed object still matches its sources;
//! when they changed, the build script builds it from source, and `cargo
//! xtask build-ebpf` writes a new one ([`store`]). The test suite builds the
//! object from source and compares it byte for byte with the committed one,
//! so a stale object cannot go unnoticed.

use std::fs;
use std::path::{Path, PathBuf};

/// The committed object, relative to the workspace root.
pub const OBJECT: &str = "trace-manager/ebpf/trace-ebpf.o";

/// The digest of the object's sources, relative to the workspace root.
pub const DIGEST: &str = "trace-manager/ebpf/trace-ebpf.o.inputs";

/// The committed object under the workspace `root`, if it exists and was
/// built from the sources there now.
pub fn current(root: &Path) -> Result<Option<PathBuf>, String> {
    let object = root.join(OBJECT);
    if !object.is_file() {
        return Ok(None);
    }
    let Ok(stored) = fs::read_to_string(root.join(DIGEST)) else {
        return Ok(None);
    };
    Ok((stored.trim() == inputs_digest(root)?).then_some(object))
}

/// Copies a freshly built `object` to [`OBJECT`] and writes the digest of
/// the sources under `root` to [`DIGEST`].
pub fn store(root: &Path, object: &Path) -> Result<(), String> {
    let dest = root.join(OBJECT);
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::copy(object, &dest).map_err(|e| {
        format!(
            "cannot copy {} to {}: {e}",
            object.display(),
            dest.display()
        )
    })?;
    let digest = root.join(DIGEST);
    fs::write(&digest, format!("{}\n", inputs_digest(root)?))
        .map_err(|e| format!("cannot write {}: {e}", digest.display()))
}

/// A digest of what the object is built from under `root`: every file of
/// `trace-ebpf` and `trace-common` (but their `target` folders), and the
/// `Cargo.lock` entries of `trace-ebpf`'s dependencies, transitively.
pub fn inputs_digest(root: &Path) -> Result<String, String> {
    let mut files = Vec::new();
    for dir in ["trace-ebpf", "trace-common"] {
        collect_files(root, Path::new(dir), &mut files)?;
    }
    files.sort();
    let mut hash = Fnv::new();
    for rel in &files {
        let bytes = fs::read(root.join(rel))
            .map_err(|e| format!("cannot read {}: {e}", root.join(rel).display()))?;
        hash.write(rel.to_string_lossy().as_bytes());
        hash.write(&[0]);
        hash.write(&(bytes.len() as u64).to_le_bytes());
        hash.write(&bytes);
    }
    let lock_path = root.join("Cargo.lock");
    let lock = fs::read_to_string(&lock_path)
        .map_err(|e| format!("cannot read {}: {e}", lock_path.display()))?;
    for block in lock_closure(&lock, "trace-ebpf") {
        hash.write(block.as_bytes());
    }
    Ok(format!(
        "fnv1a64 {:016x} files {}",
        hash.finish(),
        files.len()
    ))
}

/// Appends the files under `root/rel` to `out`, as paths relative to
/// `root`, leaving out `target` folders.
fn collect_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let dir = root.join(rel);
    let entries = fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let name = entry.file_name();
        let path = rel.join(&name);
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot stat {}: {e}", root.join(&path).display()))?;
        if kind.is_dir() {
            if name != "target" {
                collect_files(root, &path, out)?;
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The `[[package]]` blocks of `Cargo.lock` for `package` and everything it
/// depends on, in the lock's order.
fn lock_closure<'a>(lock: &'a str, package: &str) -> Vec<&'a str> {
    let blocks: Vec<LockPackage<'a>> = lock
        .split("[[package]]")
        .skip(1)
        .filter_map(LockPackage::parse)
        .collect();
    let mut wanted = vec![false; blocks.len()];
    let mut queue: Vec<(String, Option<String>)> = vec![(package.to_owned(), None)];
    while let Some((name, version)) = queue.pop() {
        for (i, block) in blocks.iter().enumerate() {
            let matches =
                block.name == name && version.as_deref().is_none_or(|v| v == block.version);
            if matches && !wanted[i] {
                wanted[i] = true;
                queue.extend(block.dependencies.iter().map(|dep| {
                    let mut parts = dep.split_whitespace();
                    let name = parts.next().unwrap_or_default().to_owned();
                    (name, parts.next().map(str::to_owned))
                }));
            }
        }
    }
    blocks
        .iter()
        .zip(wanted)
        .filter_map(|(block, wanted)| wanted.then_some(block.text))
        .collect()
}

/// One `[[package]]` block of a `Cargo.lock`.
struct LockPackage<'a> {
    text: &'a str,
    name: &'a str,
    version: &'a str,
    /// The entries of `dependencies`: `name`, or `name version [(source)]`.
    dependencies: Vec<&'a str>,
}

impl<'a> LockPackage<'a> {
    fn parse(text: &'a str) -> Option<LockPackage<'a>> {
        let field = |key: &str| {
            text.lines().find_map(|line| {
                let value = line.strip_prefix(key)?.trim().strip_prefix('=')?.trim();
                Some(value.trim_matches('"'))
            })
        };
        let dependencies = match text.split_once("dependencies = [") {
            Some((_, rest)) => rest
                .split(']')
                .next()
                .unwrap_or_default()
                .split(',')
                .map(|d| d.trim().trim_matches('"'))
                .filter(|d| !d.is_empty())
                .collect(),
            None => Vec::new(),
        };
        Some(LockPackage {
            text,
            name: field("name")?,
            version: field("version")?,
            dependencies,
        })
    }
}

/// 64-bit FNV-1a: enough to notice a change, and needs no dependency.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"
version = 4

[[package]]
name = "aya-ebpf"
version = "0.2.1"
dependencies = [
 "aya-ebpf-bindings",
]

[[package]]
name = "aya-ebpf-bindings"
version = "0.2.0"

[[package]]
name = "libc"
version = "0.2.1"

[[package]]
name = "serde"
version = "1.0.0"

[[package]]
name = "trace-common"
version = "0.1.0"
dependencies = [
 "libc 0.2.1",
]

[[package]]
name = "trace-ebpf"
version = "0.1.0"
dependencies = [
 "aya-ebpf",
 "trace-common",
]
"#;

    #[test]
    fn lock_closure_follows_dependencies_and_leaves_the_rest_out() {
        let names: Vec<&str> = lock_closure(LOCK, "trace-ebpf")
            .into_iter()
            .filter_map(|b| LockPackage::parse(b).map(|p| p.name))
            .collect();
        assert_eq!(
            names,
            [
                "aya-ebpf",
                "aya-ebpf-bindings",
                "libc",
                "trace-common",
                "trace-ebpf"
            ]
        );
    }

    #[test]
    fn digest_changes_with_a_source_file_and_not_with_target() {
        let dir = tempdir();
        let root = dir.as_path();
        for d in ["trace-ebpf/src", "trace-common/src", "trace-ebpf/target"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("Cargo.lock"), LOCK).unwrap();
        fs::write(root.join("trace-ebpf/src/main.rs"), "fn main() {}").unwrap();
        fs::write(root.join("trace-common/src/lib.rs"), "").unwrap();
        let first = inputs_digest(root).unwrap();
        fs::write(root.join("trace-ebpf/target/junk"), "x").unwrap();
        assert_eq!(inputs_digest(root).unwrap(), first);
        fs::write(root.join("trace-common/src/lib.rs"), "// changed").unwrap();
        assert_ne!(inputs_digest(root).unwrap(), first);

        assert_eq!(current(root).unwrap(), None, "nothing committed yet");
        let built = root.join("built.o");
        fs::write(&built, b"\x7fELF").unwrap();
        store(root, &built).unwrap();
        assert_eq!(current(root).unwrap(), Some(root.join(OBJECT)));
        fs::write(root.join("trace-ebpf/src/main.rs"), "fn main() { }").unwrap();
        assert_eq!(current(root).unwrap(), None, "sources changed");
        fs::remove_dir_all(root).unwrap();
    }

    /// A new empty folder under the system's temporary folder.
    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "trace-ebpf-build-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}
