//! Reading the per-CPU rings: waiting for any of them (one epoll
//! descriptor registered with tokio, and a timer), draining them, and
//! merging their entries in time order (`reorder`).

use std::io;

use aya::maps::{MapData, RingBuf};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use trace_common::kernel::{KernelEvent, events_in, parse};

use super::{
    DRAIN_INTERVAL, DRAIN_SLICE, DRAIN_STEP, KernelError, KernelProvider, RELEASE_SLICE,
    REORDER_WINDOW,
};
use crate::clock::boottime_ns;

/// The descriptor that is readable when any CPU's ring buffer has data (an
/// epoll instance watching them all), before and after it is registered
/// with tokio.
pub(super) enum Readiness {
    /// Not yet registered (no runtime needed until [`KernelProvider::readable`]).
    Plain(std::os::fd::OwnedFd),
    /// Registered with the tokio reactor.
    Async(AsyncFd<std::os::fd::OwnedFd>),
    /// Being registered.
    Moving,
}

/// One CPU's ring buffer.
pub(super) struct CpuRing {
    pub(super) cpu: u32,
    pub(super) ring: RingBuf<MapData>,
    /// Its positions, to tell how full it is (`None` if they could not be
    /// mapped).
    pub(super) positions: Option<RingPositions>,
    /// The newest timestamp read from it: what it still holds is not
    /// older (give or take the reorder window).
    pub(super) newest: u64,
}

/// A read-only mapping of a ring buffer's first two pages: the consumer
/// position (page 0) and the producer position (page 1).
pub(super) struct RingPositions {
    base: std::ptr::NonNull<libc::c_void>,
    page: usize,
}

impl RingPositions {
    /// Maps the positions of `ring`.
    pub(super) fn map(ring: &RingBuf<MapData>) -> io::Result<RingPositions> {
        let page = page_size();
        let len = std::num::NonZeroUsize::new(2 * page).ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: a new read-only shared mapping of the ring buffer map's
        // first two pages, which the kernel allows for any reader; nothing
        // else refers to it, and `Drop` unmaps it.
        let base = unsafe {
            nix::sys::mman::mmap(
                None,
                len,
                nix::sys::mman::ProtFlags::PROT_READ,
                nix::sys::mman::MapFlags::MAP_SHARED,
                ring,
                0,
            )
        }
        .map_err(io::Error::from)?;
        Ok(RingPositions { base, page })
    }

    /// Bytes written and not yet consumed.
    fn backlog(&self) -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        // SAFETY: both positions are 8-aligned `u64`s at the start of their
        // pages, inside the mapping (which lives as long as `self`), and
        // the kernel and the consumer update them atomically.
        let (consumer, producer) = unsafe {
            let base = self.base.as_ptr().cast::<u8>();
            (
                (*base.cast::<AtomicU64>()).load(Ordering::Acquire),
                (*base.add(self.page).cast::<AtomicU64>()).load(Ordering::Acquire),
            )
        };
        producer.wrapping_sub(consumer)
    }
}

// SAFETY: the mapping belongs to the process, not to a thread, and is only
// read, with atomic loads; moving its owner to another thread is sound.
unsafe impl Send for RingPositions {}

impl Drop for RingPositions {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made, used by no one else.
        if let Err(e) = unsafe { nix::sys::mman::munmap(self.base, 2 * self.page) } {
            log::debug!("unmapping ring buffer positions: {e}");
        }
    }
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

impl KernelProvider {
    /// How full the fullest CPU's ring buffer is, from 0 to 1 (0 when no
    /// fill level can be read).
    pub fn fill(&self) -> f64 {
        let size = (self.ring_buffer_bytes / self.rings.len().max(1)).max(1) as f64;
        self.rings
            .iter()
            .filter_map(|r| r.positions.as_ref())
            .map(|p| p.backlog() as f64 / size)
            .fold(0.0, f64::max)
            .min(1.0)
    }

    /// The CPUs that have a ring buffer.
    pub fn cpus(&self) -> Vec<u32> {
        self.rings.iter().map(|r| r.cpu).collect()
    }

    /// Waits until there may be entries to drain; call
    /// [`KernelProvider::drain`] after each return.
    ///
    /// The programs wake the reader only once a quarter of a CPU's ring
    /// buffer is used (a wake-up per event would cost an inter-processor
    /// interrupt each), so this also returns every [`DRAIN_INTERVAL`]:
    /// events wait at most that long in the rings. It never spins.
    ///
    /// Must run inside a tokio runtime with IO and time enabled (the first
    /// call registers the rings' epoll descriptor with it). Cancel-safe.
    pub async fn readable(&mut self) -> Result<(), KernelError> {
        if self.pending {
            // Work is left, but the task gives the others on its thread
            // their turn first: under a flood the caller's loop would
            // otherwise never let a request (a stop, a Ctrl-C) through.
            tokio::task::yield_now().await;
            return Ok(());
        }
        if let Readiness::Plain(_) = self.readiness {
            let Readiness::Plain(fd) = std::mem::replace(&mut self.readiness, Readiness::Moving)
            else {
                unreachable!("checked just above")
            };
            // SAFETY: the epoll descriptor is owned by the AsyncFd from here
            // on and stays open until the AsyncFd drops it.
            match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
                Ok(fd) => self.readiness = Readiness::Async(fd),
                Err(e) => {
                    let (fd, err) = e.into_parts();
                    self.readiness = Readiness::Plain(fd);
                    return Err(err.into());
                }
            }
        }
        let Readiness::Async(fd) = &mut self.readiness else {
            // Registration failed earlier: collect on the timer alone.
            let deadline = *self
                .next_tick
                .get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_INTERVAL);
            tokio::time::sleep_until(deadline).await;
            self.next_tick = Some(tokio::time::Instant::now() + DRAIN_INTERVAL);
            return Ok(());
        };
        let deadline = *self
            .next_tick
            .get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_INTERVAL);
        tokio::select! {
            ready = fd.readable_mut() => {
                // Readiness is cleared before the caller drains, so a wake-up
                // during the drain makes the next call return rather than
                // being lost. The epoll instance is level-triggered: it stays
                // readable while any ring holds data.
                ready?.clear_ready();
            }
            () = tokio::time::sleep_until(deadline) => {
                self.next_tick = Some(tokio::time::Instant::now() + DRAIN_INTERVAL);
            }
        }
        Ok(())
    }

    /// Decodes the entries whose turn has come and passes each event to
    /// `f`, in time order across CPUs; returns the number of events passed.
    /// Entries that fail to decode are skipped and counted
    /// ([`KernelProvider::malformed`]).
    ///
    /// A drain reads every ring (within the backlog limit) and hands on at
    /// most [`RELEASE_SLICE`] events; when it stops with more left or due,
    /// the next [`KernelProvider::readable`] returns at once.
    pub fn drain(&mut self, f: &mut dyn FnMut(KernelEvent)) -> usize {
        let (mut delivered, mut malformed) = (0usize, 0u64);
        self.drain_raw(&mut |bytes| match parse(bytes) {
            Ok(event) => {
                f(event);
                delivered += 1;
            }
            Err(e) => {
                if malformed == 0 {
                    log::warn!("skipping malformed kernel event: {e}");
                }
                malformed += 1;
            }
        });
        self.malformed += malformed;
        delivered
    }

    /// [`KernelProvider::drain`] handing on the undecoded entries (decode
    /// them with `trace_common::kernel::parse`); returns how many.
    ///
    /// Every CPU's ring is read, and the entries stamped before the
    /// watermark are handed on oldest first: [`REORDER_WINDOW`] before the
    /// time reading began, and no later than the newest entry of a ring
    /// left with entries unread (what it still holds may be older than what
    /// other rings gave). After [`KernelProvider::detach`] everything read
    /// is handed on.
    pub fn drain_raw(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        self.drain_raw_seeing(&mut |_| {}, f)
    }

    /// [`KernelProvider::drain_raw`], showing `arrived` every entry as it is
    /// read from its ring, before it waits for its turn (what must be done
    /// while the process it is about still lives).
    ///
    /// Reading the rings comes first: they are small, and the kernel drops
    /// what does not fit in them, so everything they hold is taken out at
    /// once into the backlog (while its memory is within
    /// [`KernelProvider::backlog_limit`]), and at most [`RELEASE_SLICE`] events of the backlog are
    /// handed on per call; [`KernelProvider::readable`] returns at once
    /// while more are due. After [`KernelProvider::detach`] everything is
    /// handed on.
    pub fn drain_raw_seeing(
        &mut self,
        arrived: &mut dyn FnMut(&[u8]),
        f: &mut dyn FnMut(&[u8]),
    ) -> usize {
        let limit = self.drain_limit;
        let began = boottime_ns();
        let slice_ends = std::time::Instant::now() + DRAIN_SLICE;
        let mut watermark = if self.detached {
            u64::MAX
        } else {
            began.saturating_sub(REORDER_WINDOW.as_nanos() as u64)
        };
        let mut pending = false;
        // Past the limit the rings wait, unless nothing held can be handed
        // on until more is read (the watermark only moves by reading): the
        // backlog then grows by at most one drain's reading.
        let room = self.detached || self.reorder.footprint() < self.backlog_limit;
        // Past the limit, a ring is still read when what it may hold is
        // older than everything held: nothing held can be handed on until
        // it is (the watermark only moves by reading it).
        let oldest = if room { None } else { self.reorder.oldest() };
        for cpu in &mut self.rings {
            if !room && oldest.is_some_and(|o| cpu.newest > o) {
                // Left unread: what it holds is no older than what was read
                // from it last.
                if cpu.positions.as_ref().is_none_or(|p| p.backlog() > 0) {
                    watermark = watermark.min(cpu.newest);
                    pending = true;
                }
                continue;
            }
            let mut taken = 0usize;
            while let Some(item) = cpu.ring.next() {
                for event in events_in(&item) {
                    arrived(event);
                    self.reorder.push(event);
                    if let Some(ts) = event.get(8..16).and_then(|b| b.try_into().ok()) {
                        cpu.newest = cpu.newest.max(u64::from_ne_bytes(ts));
                    }
                }
                taken += 1;
                // Detached: the last drain reads everything.
                let out_of_time = !self.detached
                    && taken.is_multiple_of(DRAIN_STEP)
                    && std::time::Instant::now() > slice_ends;
                if taken >= limit || out_of_time {
                    pending = true;
                    watermark = watermark.min(cpu.newest);
                    break;
                }
            }
            self.reorder.end_run();
        }
        let slice = if self.detached {
            usize::MAX
        } else {
            RELEASE_SLICE
        };
        // In one call: each call merges the runs read since the last, so
        // calls in small steps would cost more than they give.
        let n = self.reorder.release_at_most(watermark, slice, f);
        self.pending = pending || self.reorder.has_before(watermark);
        n
    }

    /// Whether the last drain left events in a ring or due in the
    /// backlog.
    pub fn has_pending(&self) -> bool {
        self.pending
    }

    /// Bytes of events read from the rings and not yet handed on.
    pub fn backlog(&self) -> usize {
        self.reorder.bytes()
    }

    /// Memory the backlog takes now, its allocations counted whole.
    pub fn backlog_footprint(&self) -> usize {
        self.reorder.footprint()
    }

    /// Most memory the backlog may take ([`Self::backlog_footprint`]):
    /// past it the rings are left to fill (and the kernel to drop).
    pub fn backlog_limit(&self) -> usize {
        self.backlog_limit
    }
}
