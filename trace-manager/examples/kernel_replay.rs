//! The manager's side of the kernel provider, apart from the kernel's:
//! records a command's kernel events as they come out of the ring buffers
//! (undecoded, in the order they are read), then replays them through what
//! the manager does with each — the merge in time order, decoding, the
//! translation into FXT records, encoding into an output buffer — on one
//! CPU, and prints the rate.
//!
//! `kernel_replay [--categories CATS] [--rounds N] [--buffer-mb MB] --
//! COMMAND [ARGS...]` (as root). `cargo xtask bench throughput` runs it
//! pinned to one CPU.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use trace_common::kernel::{EntryRef, with_entry};
use trace_manager::kernel::reorder::Reorder;
use trace_manager::kernel::translate::KernelTranslator;
use trace_manager::kernel::{KernelConfig, KernelProvider};
use trace_manager::output::FxtStream;

/// Entries taken from the rings at a time, as a drain takes them.
const CHUNK: usize = 8192;

/// An output buffer handed on (and emptied) every MiB, as the manager's
/// output buffer is handed to its writer thread.
#[derive(Default)]
struct Buffer {
    buf: Vec<u8>,
    bytes: u64,
}

impl Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= 1 << 20 {
            self.bytes += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What was read from the rings: every entry's bytes, back to back.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Captured {
    fn entries(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.bytes[s..e])
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dash) = args.iter().position(|a| a == "--") else {
        bail!(
            "usage: kernel_replay [--categories CATS] [--rounds N] [--buffer-mb MB] -- COMMAND..."
        );
    };
    let (opts, command) = (&args[..dash], &args[dash + 1..]);
    if command.is_empty() {
        bail!("no command to record");
    }
    let mut categories = vec!["kernel:syscall".to_owned(), "kernel:sched".to_owned()];
    let mut rounds = 5usize;
    let mut buffer_mb = 256usize;
    let mut it = opts.iter();
    while let Some(o) = it.next() {
        let v = it.next().with_context(|| format!("{o} needs a value"))?;
        match o.as_str() {
            "--categories" => categories = v.split(',').map(str::to_owned).collect(),
            "--rounds" => rounds = v.parse()?,
            "--buffer-mb" => buffer_mb = v.parse()?,
            _ => bail!("unknown option {o}"),
        }
    }

    // Record: the rings are read as the manager reads them, and what comes
    // out of them is kept undecoded.
    let mut kernel = KernelProvider::start(&KernelConfig {
        categories,
        ring_buffer_bytes: buffer_mb << 20,
        ..KernelConfig::default()
    })
    .context("starting the kernel provider")?;
    let start = trace_manager::clock::boottime_ns();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .with_context(|| format!("running {command:?}"))?;
    let mut captured = Captured::default();
    let mut keep = |b: &[u8]| {
        captured.bytes.extend_from_slice(b);
        captured.ends.push(captured.bytes.len());
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        loop {
            kernel.drain_raw_seeing(&mut keep, &mut |_| {});
            if child.try_wait()?.is_some() {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(20), kernel.readable()).await;
        }
        anyhow::Ok(())
    })?;
    let stop = kernel.cut()?;
    kernel.detach();
    kernel.drain_raw_seeing(&mut keep, &mut |_| {});
    let dropped = kernel.dropped()?;
    drop(kernel);
    let events = captured.ends.len();
    eprintln!(
        "kernel_replay: captured {events} events ({} MB), {dropped} dropped",
        captured.bytes.len() >> 20
    );
    if events == 0 {
        bail!("nothing captured");
    }

    // Replay, `rounds` times; the median round's rate is printed.
    let mut rates = Vec::new();
    let mut out_bytes = 0;
    for _ in 0..rounds {
        let mut translator = KernelTranslator::new();
        translator.set_start(start);
        translator.set_stop(stop);
        let mut out = FxtStream::new(Buffer::default())?;
        let mut reorder = Reorder::default();
        let mut newest: Vec<u64> = Vec::new();
        let mut last_cpu = None;
        let mut failed = None;
        let mut translate = |bytes: &[u8]| {
            // As the manager's drain does it.
            let r = with_entry(bytes, |entry| match entry {
                EntryRef::Fixed(e) => translator.translate(&mut out, e),
                EntryRef::Tracepoint(t) => translator.tracepoint(&mut out, &t),
                EntryRef::Stack(s) => translator.stack(&mut out, &s),
            });
            if let Ok(Err(e)) = r {
                failed.get_or_insert(e);
            }
        };
        let began = Instant::now();
        let all: Vec<&[u8]> = captured.entries().collect();
        for chunk in all.chunks(CHUNK) {
            newest.clear();
            for entry in chunk {
                let (Some(cpu), Some(ts)) = (word(entry, 4), quad(entry, 8)) else {
                    reorder.push(entry);
                    continue;
                };
                let cpu = cpu as usize;
                // Each ring is read in turn: a new ring's entries begin.
                if last_cpu != Some(cpu) {
                    reorder.end_run();
                    last_cpu = Some(cpu);
                }
                reorder.push(entry);
                if newest.len() <= cpu {
                    newest.resize(cpu + 1, 0);
                }
                newest[cpu] = newest[cpu].max(ts);
            }
            // What a ring still holds is no older than its newest entry.
            reorder.end_run();
            last_cpu = None;
            let watermark = newest.iter().copied().filter(|&t| t > 0).min().unwrap_or(0);
            reorder.release(watermark, &mut translate);
        }
        reorder.release(u64::MAX, &mut translate);
        translator.finish_open(&mut out)?;
        let secs = began.elapsed().as_secs_f64();
        if let Some(e) = failed {
            bail!("translating: {e}");
        }
        let buffer = out.into_inner();
        out_bytes = buffer.bytes + buffer.buf.len() as u64;
        rates.push(events as f64 / secs);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "replayed {events} kernel events in {rounds} rounds: median {:.2} M events/s \
         ({:.0} ns/event), {:.1} bytes of FXT per event",
        median / 1e6,
        1e9 / median,
        out_bytes as f64 / events as f64
    );
    Ok(())
}

fn word(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn quad(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
