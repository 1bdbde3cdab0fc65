//! The buffering policy of the kernel's events: what happens to each entry
//! the rings hand on, by [`BufferingMode`].
//!
//! - Streaming: translated into the output at once.
//! - Oneshot: translated at once until `budget` bytes of entries were,
//!   then refused (counted as dropped).
//! - Circular: kept undecoded, the newest `budget` bytes of them, and
//!   translated when the recording stops ([`Keep::write`]) or when a
//!   snapshot asks ([`Keep::replay`]); the names the forgotten ones gave
//!   are kept, so that what remains is still named.

use std::collections::VecDeque;
use std::io::Write;

use trace_common::kernel::{Entry, EntryRef, parse_entry, with_entry};
use trace_common::provider::BufferingMode;

use super::translate::{KernelTranslator, NameState};
use crate::output::{FxtStream, OutputError};

/// The kernel events a session holds back, and its policy.
#[derive(Debug)]
pub struct Keep {
    mode: BufferingMode,
    /// Bytes of entries a oneshot recording writes, or a circular one
    /// keeps.
    budget: u64,
    /// Bytes of entries written so far (oneshot).
    used: u64,
    /// Entries refused because the oneshot budget was spent.
    refused: u64,
    /// The newest entries (circular): each a little-endian `u16` length and
    /// the entry's bytes.
    ring: VecDeque<u8>,
    /// The names the entries forgotten from `ring` gave (circular): the
    /// kept events' processes and threads are named as they were when the
    /// first kept event happened.
    forgotten: NameState,
    /// Whether entries were forgotten (circular): what is kept then begins
    /// at its first event, not where the recording began.
    forgot: bool,
}

impl Keep {
    /// The policy `mode` with `budget` bytes.
    pub fn new(mode: BufferingMode, budget: u64) -> Self {
        Keep {
            mode,
            budget,
            used: 0,
            refused: 0,
            ring: VecDeque::new(),
            forgotten: NameState::default(),
            forgot: false,
        }
    }

    /// Whether entries are kept to be written at the stop.
    pub fn is_circular(&self) -> bool {
        self.mode == BufferingMode::Circular
    }

    /// Whether a circular recording keeps entries not yet written.
    pub fn holds(&self) -> bool {
        !self.ring.is_empty()
    }

    /// Entries the oneshot budget refused.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Forgets what is held, for a start that begins afresh.
    pub fn clear(&mut self) {
        self.ring.clear();
        self.forgotten = NameState::default();
        self.forgot = false;
        self.used = 0;
    }

    /// One entry handed on by the rings: translated, refused or kept, as
    /// the mode says. `Ok(false)` when it does not decode.
    pub fn entry<W: Write>(
        &mut self,
        bytes: &[u8],
        translator: &mut KernelTranslator,
        out: &mut FxtStream<W>,
    ) -> Result<bool, OutputError> {
        match self.mode {
            BufferingMode::Circular => {
                let len = bytes.len().min(usize::from(u16::MAX));
                self.ring.extend((len as u16).to_le_bytes());
                self.ring.extend(&bytes[..len]);
                self.forget_beyond();
                Ok(true)
            }
            BufferingMode::Oneshot if self.used + bytes.len() as u64 > self.budget => {
                self.refused += 1;
                Ok(true)
            }
            _ => {
                self.used += bytes.len() as u64;
                match with_entry(bytes, |entry| translator.entry(out, entry)) {
                    Ok(written) => written.map(|()| true),
                    Err(_) => Ok(false),
                }
            }
        }
    }

    /// Forgets the oldest whole entries until `ring` holds at most the
    /// budget, keeping the names they gave.
    fn forget_beyond(&mut self) {
        let mut bytes = Vec::new();
        while self.ring.len() as u64 > self.budget {
            let old = usize::from(u16::from_le_bytes([self.ring[0], self.ring[1]]));
            let end = (2 + old).min(self.ring.len());
            bytes.clear();
            bytes.extend(self.ring.range(2..end));
            if let Ok(Entry::Fixed(event)) = parse_entry(&bytes) {
                self.forgotten.apply(&event);
            }
            self.ring.drain(..end);
            self.forgot = true;
        }
    }

    /// Writes what a circular recording kept, oldest first, with
    /// `translator`, and lets go of it. Returns the entries that could not
    /// be read.
    pub fn write<W: Write>(
        &mut self,
        translator: &mut KernelTranslator,
        out: &mut FxtStream<W>,
    ) -> Result<u64, OutputError> {
        let ring = std::mem::take(&mut self.ring);
        let forgotten = std::mem::take(&mut self.forgotten);
        let forgot = std::mem::take(&mut self.forgot);
        if ring.is_empty() {
            return Ok(0);
        }
        translator.write_names(out, &forgotten)?;
        translate_kept(translator, out, &ring, forgot, true)
    }

    /// Writes what a circular recording keeps now with `translator`, a
    /// fresh one, keeping it: the names as they were at the first kept
    /// event, then the events, stacks left out.
    pub fn replay<W: Write>(
        &self,
        translator: &mut KernelTranslator,
        out: &mut FxtStream<W>,
    ) -> Result<u64, OutputError> {
        translator.write_names(out, &self.forgotten)?;
        translate_kept(translator, out, &self.ring, self.forgot, false)
    }
}

/// Translates the entries of `ring` (each a little-endian `u16` length and
/// the entry's bytes), oldest first; when older ones were forgotten,
/// `translator` starts at the first kept event (what began before it is
/// written as begun there). Returns the entries that could not be read.
fn translate_kept<W: Write>(
    translator: &mut KernelTranslator,
    out: &mut FxtStream<W>,
    ring: &VecDeque<u8>,
    forgot: bool,
    stacks: bool,
) -> Result<u64, OutputError> {
    let (mut at, mut malformed, mut first) = (0, 0, forgot);
    let mut bytes = Vec::new();
    while at + 2 <= ring.len() {
        let len = usize::from(u16::from_le_bytes([ring[at], ring[at + 1]]));
        bytes.clear();
        bytes.extend(ring.range(at + 2..(at + 2 + len).min(ring.len())));
        at += 2 + len;
        let written = with_entry(&bytes, |entry| {
            match entry {
                EntryRef::Stack(_) if !stacks => return Ok(()),
                EntryRef::Fixed(event) if std::mem::take(&mut first) => {
                    translator.set_start(event.header().ts);
                }
                _ => {}
            }
            translator.entry(out, entry)
        });
        match written {
            Ok(result) => result?,
            Err(_) => malformed += 1,
        }
    }
    Ok(malformed)
}
