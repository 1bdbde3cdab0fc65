//! What the reading commands do with a damaged file: they say what they
//! skipped and exit 1, as `convert`, `dump` and `check` do, unless the
//! user accepts the damage with `--skip-damage`. A damaged file still
//! gives every answer that could be read.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

/// The `--skip-damage` option of a command that reads a trace.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct DamageArgs {
    /// Exit 0 even when malformed records (or Perfetto packets that do not
    /// decode) were skipped; without it a damaged file makes the exit
    /// status 1, after the output of everything that could be read.
    #[arg(long)]
    pub skip_damage: bool,
}

/// What reading one file skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Records that did not parse.
    pub records: u64,
    /// Perfetto packets (in blob records) that did not decode.
    pub packets: u64,
}

impl Skipped {
    /// Whether anything was skipped.
    pub fn any(self) -> bool {
        self.records > 0 || self.packets > 0
    }
}

impl DamageArgs {
    /// The hint that ends a damage message: how to accept the file.
    pub fn hint(self) -> &'static str {
        if self.skip_damage {
            ""
        } else {
            " (--skip-damage accepts a damaged file)"
        }
    }

    /// Says what was skipped in `file` (nothing when nothing was), with
    /// `first`, the first problem, when known.
    pub fn warn(self, skipped: Skipped, file: &Path, first: Option<&str>) {
        let first = first
            .map(|f| format!(", the first: {f}"))
            .unwrap_or_default();
        if skipped.records > 0 {
            eprintln!(
                "trace-cli: skipped {} malformed record(s) in {}{first}{}",
                skipped.records,
                file.display(),
                self.hint()
            );
        } else if skipped.packets > 0 {
            eprintln!(
                "trace-cli: {} problem(s) in the Perfetto packets of {}{first} (`trace-cli check` lists them){}",
                skipped.packets,
                file.display(),
                self.hint()
            );
        }
        if skipped.records > 0 && skipped.packets > 0 {
            eprintln!(
                "trace-cli: and {} problem(s) in its Perfetto packets (`trace-cli check` lists them)",
                skipped.packets
            );
        }
    }

    /// The exit status of a command whose work succeeded: failure when
    /// anything was skipped and the user did not accept it.
    pub fn status(self, skipped: Skipped) -> ExitCode {
        if skipped.any() && !self.skip_damage {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_fails_unless_accepted() {
        let damaged = Skipped {
            records: 2,
            packets: 0,
        };
        let strict = DamageArgs { skip_damage: false };
        let lenient = DamageArgs { skip_damage: true };
        assert_eq!(strict.status(damaged), ExitCode::FAILURE);
        assert_eq!(lenient.status(damaged), ExitCode::SUCCESS);
        assert_eq!(strict.status(Skipped::default()), ExitCode::SUCCESS);
        let packets = Skipped {
            records: 0,
            packets: 1,
        };
        assert_eq!(strict.status(packets), ExitCode::FAILURE);
        assert!(strict.hint().contains("--skip-damage"));
        assert!(lenient.hint().is_empty());
    }
}
