//! A session's course for every provider: initialize (with buffers scaled
//! to the memory budget), start, stop, terminate.

use std::io::{IoSlice, Write};
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};
use trace_common::provider::BufferDisposition;
use trace_common::provider::buffer::CHUNK_BYTES;
use trace_common::provider::clock::ClockKind;
use trace_common::provider::control::ManagerMessage;

use super::buffer::Buffer;
use super::collect::{self, Forwarder, Rolling};
use super::provider::{Phase, Provider, Trace, send_ctl, start_one};
use super::{ProviderStats, Registry, UserspaceConfig, UserspaceError, io};
use crate::limits::{MIN_PROVIDER_BUFFER, mib};
use crate::output::FxtStream;

/// The cgroups a session's config selects (none before a session).
fn config_cgroups(config: &Option<UserspaceConfig>) -> &[String] {
    config.as_ref().map_or(&[], |c| &c.cgroups)
}

/// Whether provider `p` takes part under the cgroup selection `cgroups`
/// (empty: every provider): its process is in one of them or below.
fn selected(cgroups: &[String], p: &Provider) -> bool {
    cgroups.is_empty()
        || u32::try_from(p.info.pid)
            .ok()
            .and_then(crate::cgroup::of_process)
            .is_some_and(|c| cgroups.iter().any(|s| crate::cgroup::within(&c, s)))
}

impl Registry {
    /// Begins a session: every registered provider gets a buffer and
    /// Initialize.
    pub fn initialize_all(&mut self, config: UserspaceConfig) {
        let budget = config.budget;
        self.config = Some(config);
        self.granted = 0;
        self.departed.clear();
        let asked: u64 = self
            .providers
            .iter()
            .filter(|p| !p.gone && !p.aborted && selected(config_cgroups(&self.config), p))
            .map(|p| self.buffer_bytes(&p.info.name))
            .sum();
        self.share = if asked > budget {
            let share = budget as f64 / asked as f64;
            log::warn!(
                "providers ask for {} of buffers, the session's memory budget leaves {}: each \
                 gets {:.0}% of what it asked for",
                mib(asked),
                mib(budget),
                share * 100.0
            );
            share
        } else {
            1.0
        };
        self.phase = Phase::Initialized;
        let mut providers = std::mem::take(&mut self.providers);
        for p in &mut providers {
            if !p.gone
                && !p.aborted
                && let Err(e) = self.initialize(p)
            {
                log::warn!("provider {}: could not initialize it: {e}", p.info.name);
            }
        }
        self.providers = providers;
    }

    /// Sends Start to every provider in the session (and, from now on, to
    /// those that register). After a stop that wrote the buffers, buffers
    /// are cleared whatever `disposition` says, so nothing is written
    /// twice.
    pub fn start_all(&mut self, disposition: BufferDisposition, additional: &[String]) {
        self.phase = Phase::Started;
        self.start = (disposition, additional.to_vec());
        for p in &mut self.providers {
            start_one(p, disposition, additional);
        }
    }

    /// Whether every provider in the session has answered the last start
    /// (or cannot any more).
    pub fn all_started(&self) -> bool {
        self.providers
            .iter()
            .all(|p| p.trace.as_ref().is_none_or(|t| t.started) || p.aborted || p.gone)
    }

    fn buffer_bytes(&self, name: &str) -> u64 {
        let Some(config) = &self.config else {
            return 1 << 20;
        };
        config
            .overrides
            .iter()
            .find(|(n, _)| n == name)
            .map_or(config.buffer_bytes, |(_, b)| *b)
    }

    pub(super) fn initialize(&mut self, p: &mut Provider) -> std::io::Result<()> {
        let Some(config) = &self.config else {
            return Ok(());
        };
        if !selected(&config.cgroups, p) {
            p.info.state = "left out: outside the selected cgroups";
            log::info!(
                "provider {} (pid {}) is outside the selected cgroups: left out",
                p.info.name,
                p.info.pid
            );
            return Ok(());
        }
        let asked = self.buffer_bytes(&p.info.name);
        let left = config.budget.saturating_sub(self.granted);
        // Its share, in whole chunks, at least the minimum.
        let share = ((asked as f64 * self.share) as u64 & !(CHUNK_BYTES as u64 - 1))
            .clamp(MIN_PROVIDER_BUFFER.min(asked), asked);
        let len = if share <= left {
            if share < asked {
                log::info!(
                    "provider {} gets a buffer of {} instead of {} (session memory budget)",
                    p.info.name,
                    mib(share),
                    mib(asked)
                );
            }
            share
        } else if left >= MIN_PROVIDER_BUFFER {
            // What is left, in whole chunks.
            let len = left & !(CHUNK_BYTES as u64 - 1);
            log::warn!(
                "provider {} gets a buffer of {} instead of {}: the session's memory budget \
                 has {} left",
                p.info.name,
                mib(len),
                mib(asked),
                mib(left)
            );
            len
        } else {
            p.info.state = "left out: memory budget";
            return Err(std::io::Error::other(format!(
                "the session's memory budget has {} left, less than the {} a provider needs \
                 at least (trace-manager --session-memory-budget)",
                mib(left),
                mib(MIN_PROVIDER_BUFFER)
            )));
        };
        let buffer = Buffer::new(len)?;
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .map_err(io)?;
        let categories = config
            .category_overrides
            .iter()
            .find(|(n, _)| *n == p.info.name)
            .map_or(&config.categories, |(_, c)| c);
        let init = ManagerMessage::Initialize {
            mode: config.mode,
            categories: categories.clone(),
        }
        .encode()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        let fds = [buffer.memfd(), theirs.as_raw_fd()];
        sendmsg::<()>(
            p.ctl.as_raw_fd(),
            &[IoSlice::new(&init)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        )
        .map_err(io)?;
        let serial = self.next_trace;
        self.next_trace += 1;
        let watcher = self.watch_fifo(p.info.id, serial, &ours)?;
        let tsc_start = (p.clock == ClockKind::Tsc).then(collect::anchor);
        p.trace = Some(Trace {
            serial,
            fifo: ours,
            buffer,
            fwd: Forwarder::new(
                p.info.id,
                &p.info.name,
                u32::try_from(p.info.pid).unwrap_or(0),
                tsc_start,
            ),
            watcher,
            started: false,
            stopped: false,
            last_saved: None,
            last_durable: 0,
            unwritten: false,
            deferred: None,
        });
        self.granted += len;
        p.info.state = "initialized";
        Ok(())
    }

    /// Sends Stop to every provider that runs; [`Registry::all_stopped`]
    /// says when they have confirmed.
    pub fn begin_stop(&mut self) {
        if self.phase != Phase::Started {
            return;
        }
        self.phase = Phase::Stopped;
        for p in &mut self.providers {
            if let Some(t) = p.trace.as_mut()
                && !p.aborted
                && !p.gone
            {
                t.stopped = false;
                t.unwritten = true;
                p.info.state = "stopping";
                let _ = send_ctl(p.ctl.as_raw_fd(), &ManagerMessage::Stop);
            }
        }
    }

    /// Whether every provider in the session confirmed the stop (or cannot
    /// any more).
    pub fn all_stopped(&self) -> bool {
        self.providers
            .iter()
            .all(|p| p.trace.as_ref().is_none_or(|t| t.stopped) || p.aborted || p.gone)
    }

    /// After a stop: with `write_results`, collects every buffer into
    /// `out`; returns each provider's numbers.
    pub fn finish_stop<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
        write_results: bool,
    ) -> Result<Vec<ProviderStats>, UserspaceError> {
        if write_results {
            self.write_all(out)?;
        }
        Ok(self.stats())
    }

    /// Collects every buffer that holds records not yet written.
    fn write_all<W: Write>(&mut self, out: &mut FxtStream<W>) -> Result<(), UserspaceError> {
        let Some(mode) = self.config.as_ref().map(|c| c.mode) else {
            return Ok(());
        };
        for p in &mut self.providers {
            let Some(t) = p.trace.as_mut() else { continue };
            if t.unwritten {
                t.collect_unwritten(out, mode)?;
            }
        }
        Ok(())
    }

    /// The records providers have written and not yet handed over (a
    /// streaming session's current buffers), as they would be written at a
    /// stop, into whole records for another output: each provider declared
    /// with its names and threads again. Nothing changes here: the same
    /// records are still collected when the buffers are saved.
    pub fn peek(&self) -> Result<Vec<u8>, UserspaceError> {
        let Some(mode) = self.config.as_ref().map(|c| c.mode) else {
            return Ok(Vec::new());
        };
        let mut out = FxtStream::new(Vec::new())?;
        for p in &self.providers {
            let Some(t) = p.trace.as_ref() else { continue };
            let snap = t.buffer.snapshot(mode);
            let mut fwd = t.fwd.for_other_output();
            collect::collect(
                &mut out,
                &mut fwd,
                &snap,
                mode,
                Rolling::Final {
                    last_saved: t.last_saved,
                },
            )?;
        }
        let mut bytes = out.finish()?;
        // Without the stream's own magic number record.
        bytes.drain(..bytes.len().min(8));
        Ok(bytes)
    }

    /// Ends the session after its last stop: writes what was not
    /// written, and terminates every provider's trace. Providers stay
    /// registered; those that went away are forgotten.
    pub fn terminate<W: Write>(
        &mut self,
        out: &mut FxtStream<W>,
    ) -> Result<Vec<ProviderStats>, UserspaceError> {
        let written = self.write_all(out);
        let stats = self.stats();
        self.end();
        written.map(|()| stats)
    }

    /// Ends the session without writing anything (the client went away).
    pub fn end(&mut self) {
        for p in &mut self.providers {
            if let Some(t) = p.trace.take() {
                t.watcher.abort();
                let _ = send_ctl(p.ctl.as_raw_fd(), &ManagerMessage::Terminate);
            }
            if !p.aborted && !p.gone {
                p.info.state = "registered";
            }
        }
        self.providers.retain(|p| !p.aborted && !p.gone);
        self.phase = Phase::Idle;
        self.config = None;
        self.alerts.clear();
        self.departed.clear();
    }
}
