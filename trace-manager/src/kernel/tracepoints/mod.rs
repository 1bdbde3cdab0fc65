//! Tracepoints selected by name: `-e GROUP:EVENT`, globs, `ENTRY..EXIT`
//! pairs and `if FILTER` expressions, resolved against tracefs before
//! anything is loaded.
//!
//! A selection spec is `ITEM[,ITEM…][ if FILTER]`, where an item is
//! `GROUP:EVENT` (`*` and `?` match any text or character in either part)
//! or `GROUP:ENTRY..GROUP:EXIT` (a pair: each entry and the next exit on the
//! same thread become one duration). The filter applies to every event the
//! items select (for a pair, to its entry).

mod attach;
mod decode;
pub mod field;
pub mod filter;
pub mod print_fmt;
mod select;

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;

use trace_common::kernel::tracepoint::TracepointConfig;

pub use decode::{Decoded, decode};
use field::Field;
pub use select::{catalog, fields, select};

/// Why a selection cannot be recorded.
#[derive(Debug, thiserror::Error)]
pub enum TracepointError {
    /// tracefs has no events directory to select from.
    #[error("cannot list the kernel's tracepoints in {path}: {source}")]
    Catalog {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A spec is not understood.
    #[error("-e {spec:?}: {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A name or glob matches no tracepoint.
    #[error("-e {spec:?}: no tracepoint {name}{}", suggestion(.suggestions))]
    Unknown {
        /// The spec as given.
        spec: String,
        /// The name or glob.
        name: String,
        /// Close names.
        suggestions: Vec<String>,
    },
    /// A format file could not be read or understood.
    #[error("tracepoint {name}: cannot read its format: {reason}")]
    Format {
        /// `group:event`.
        name: String,
        /// Why.
        reason: String,
    },
    /// A filter does not fit an event it applies to.
    #[error("-e {spec:?}: filter on {name}: {reason}")]
    Filter {
        /// The spec as given.
        spec: String,
        /// `group:event`.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An event is selected twice in ways that contradict.
    #[error("{name} is selected twice: {reason}")]
    Conflict {
        /// `group:event`.
        name: String,
        /// How.
        reason: String,
    },
}

fn suggestion(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

/// What a selected tracepoint's events become.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// An instant each.
    Instant,
    /// The start of a duration of pair `n`.
    Entry(usize),
    /// The end of a duration of pair `n`.
    Exit(usize),
}

/// One selected tracepoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracepoint {
    /// Its group (`sched`).
    pub group: String,
    /// Its name (`sched_migrate_task`).
    pub event: String,
    /// Its id (`common_type`).
    pub id: u32,
    /// Every field of its record, the `common_*` ones included.
    pub fields: Vec<Field>,
    /// What the eBPF program does with it.
    pub config: TracepointConfig,
    /// What its events become.
    pub role: Role,
    /// The filter as written, if any.
    pub filter: Option<String>,
    /// Named exactly by a spec (not only matched by a glob): one the kernel
    /// refuses to attach fails the recording; a glob's is left out.
    pub named: bool,
}

impl Tracepoint {
    /// `group:event`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.group, self.event)
    }
}

/// An entry/exit pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The durations' name.
    pub name: String,
    /// The entry tracepoint's id.
    pub entry: u32,
    /// The exit tracepoint's id.
    pub exit: u32,
}

/// The tracepoints a recording selected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Each selected tracepoint once.
    pub tracepoints: Vec<Tracepoint>,
    /// The pairs, indexed by [`Role::Entry`] / [`Role::Exit`].
    pub pairs: Vec<Pair>,
    by_id: HashMap<u32, usize>,
}

impl Selection {
    /// The tracepoint with id `id`.
    pub fn get(&self, id: u32) -> Option<&Tracepoint> {
        self.by_id.get(&id).map(|&i| &self.tracepoints[i])
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.tracepoints.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
