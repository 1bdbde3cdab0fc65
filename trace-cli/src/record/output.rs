//! The `-o` file of a recording, made so that a recording the manager
//! refuses (another session runs, a bad configuration) leaves what was at
//! that path as it was: an existing file is replaced only once the session
//! is granted, and a file made for a refused session is removed.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The output descriptor handed to the manager, and what to do with the
/// path once the session is granted or refused.
pub(super) struct Output {
    fd: OwnedFd,
    pending: Pending,
}

/// What is still to be done with the path.
enum Pending {
    /// Nothing (standard output, a device or a pipe, or done).
    Nothing,
    /// The trace goes to `temp` beside the existing regular file `target`,
    /// renamed over it once granted, removed if refused.
    Replace { temp: PathBuf, target: PathBuf },
    /// `path` did not exist and was made: removed if refused.
    Made(PathBuf),
}

impl Output {
    /// Opens `path` for the trace (standard output with `to_stdout`, which
    /// must not be a terminal).
    pub(super) fn open(path: &Path, to_stdout: bool) -> Result<Output> {
        if to_stdout {
            use std::io::IsTerminal as _;
            if std::io::stdout().is_terminal() {
                bail!("-o - writes the binary trace to standard output: pipe or redirect it");
            }
            let fd = std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("duplicating standard output")?;
            return Ok(Output {
                fd,
                pending: Pending::Nothing,
            });
        }
        let existing = std::fs::symlink_metadata(path).ok();
        if existing.as_ref().is_some_and(|m| m.file_type().is_file()) {
            let temp = temp_beside(path);
            let file = create_new(&temp, path)?;
            return Ok(Output {
                fd: file.into(),
                pending: Pending::Replace {
                    temp,
                    target: path.to_owned(),
                },
            });
        }
        if existing.is_none()
            && let Ok(file) = create_new(path, path)
        {
            return Ok(Output {
                fd: file.into(),
                pending: Pending::Made(path.to_owned()),
            });
        }
        // A device, a pipe, a link, or a path made meanwhile: opened as it is.
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Output {
            fd: file.into(),
            pending: Pending::Nothing,
        })
    }

    /// The descriptor the manager writes to.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The session was granted: the trace takes the path.
    pub(super) fn granted(mut self) -> Result<OwnedFd> {
        if let Pending::Replace { temp, target } =
            std::mem::replace(&mut self.pending, Pending::Nothing)
        {
            std::fs::rename(&temp, &target).with_context(|| {
                std::fs::remove_file(&temp).ok();
                format!("cannot replace {}", target.display())
            })?;
        }
        self.pending = Pending::Nothing;
        let fd = self
            .fd
            .try_clone()
            .context("duplicating the output descriptor")?;
        Ok(fd)
    }
}

impl Drop for Output {
    /// A refused session: what was made for it goes.
    fn drop(&mut self) {
        match &self.pending {
            Pending::Nothing => {}
            Pending::Replace { temp: made, .. } | Pending::Made(made) => {
                std::fs::remove_file(made).ok();
            }
        }
    }
}

/// A new file at `path` (which must not exist), mode 0666 less the umask
/// as `File::create` makes; `shown` names it in errors.
fn create_new(path: &Path, shown: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .open(path)
        .with_context(|| format!("cannot create {}", shown.display()))
}

/// A hidden name beside `path`, unique to this process.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.recording-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("trace-cli-output-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_refused_session_leaves_an_existing_file_as_it_was() {
        let d = dir().join("refused");
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("t.fxt");
        std::fs::write(&path, b"an earlier trace").unwrap();
        drop(Output::open(&path, false).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"an earlier trace");
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "no file left beside it"
        );
        // A new path is removed again.
        let new = d.join("new.fxt");
        drop(Output::open(&new, false).unwrap());
        assert!(!new.exists());
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_granted_session_replaces_the_file() {
        use std::io::Write as _;
        let d = dir().join("granted");
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("t.fxt");
        std::fs::write(&path, b"an earlier, longer trace").unwrap();
        let out = Output::open(&path, false).unwrap();
        let fd = out.granted().unwrap();
        File::from(fd).write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).ok();
    }
}
