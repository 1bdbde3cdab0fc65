//! Finding (and if need be mounting) tracefs.

use std::io;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted by default.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Where older systems expose it, under debugfs.
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// Whether `dir` is a mounted tracefs (it has an `events` directory).
fn is_tracefs(dir: &Path) -> bool {
    dir.join("events").is_dir()
}

/// The tracefs root if tracefs is mounted (never mounts it).
pub fn mounted_root() -> Option<PathBuf> {
    [TRACEFS, DEBUGFS_TRACING]
        .into_iter()
        .map(Path::new)
        .find(|d| is_tracefs(d))
        .map(Path::to_path_buf)
}

/// The tracefs root, mounting tracefs at [`TRACEFS`] when neither it nor
/// [`DEBUGFS_TRACING`] is mounted.
pub fn tracefs_root() -> io::Result<PathBuf> {
    for dir in [TRACEFS, DEBUGFS_TRACING] {
        if is_tracefs(Path::new(dir)) {
            return Ok(PathBuf::from(dir));
        }
    }
    let root = Path::new(TRACEFS);
    if !root.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{TRACEFS} does not exist (kernel without CONFIG_TRACING?)"),
        ));
    }
    log::info!("mounting tracefs at {TRACEFS}");
    nix::mount::mount(
        Some("nodev"),
        root,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(io::Error::from)?;
    if is_tracefs(root) {
        Ok(root.to_path_buf())
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("tracefs mounted at {TRACEFS} has no events directory"),
        ))
    }
}

/// The path of the format file of tracepoint `group:event` under `root`.
pub fn format_path(root: &Path, group: &str, event: &str) -> PathBuf {
    root.join("events").join(group).join(event).join("format")
}
