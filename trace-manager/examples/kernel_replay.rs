//! The manager's side of the kernel provider, apart from the kernel's:
//! records a command's kernel events as they come out of the ring buffers
//! (undecoded, in the order they are read), then replays them through what
//! the manager does with each — the merge in time order, decoding, the
//! translation into FXT records, encoding into an output buffer — on one
//! CPU, and prints the rate.
//!
//! `kernel_replay [--categories CATS] [--rounds N] [--buffer-mb MB]
//! [--save FILE] [--digest] -- COMMAND [ARGS...]` (as root), or
//! `kernel_replay --load FILE [--rounds N] [--digest]` to replay what an
//! earlier run saved. `--digest` prints a digest of the FXT one round
//! wrote, so that two builds of the manager can be shown to write the same
//! records for the same events. `cargo xtask bench throughput` runs it
//! pinned to one CPU.

use std::hash::{DefaultHasher, Hasher};
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use trace_common::kernel::with_entry;
use trace_manager::kernel::reorder::Reorder;
use trace_manager::kernel::translate::KernelTranslator;
use trace_manager::kernel::{KernelConfig, KernelProvider};
use trace_manager::output::FxtStream;

/// Entries taken from the rings at a time, as a drain takes them.
const CHUNK: usize = 8192;

/// An output buffer handed on (and emptied) every MiB, as the manager's
/// output buffer is handed to its writer thread; with `digest`, everything
/// written is hashed on the way.
#[derive(Default)]
struct Buffer {
    buf: Vec<u8>,
    bytes: u64,
    digest: Option<DefaultHasher>,
}

impl Buffer {
    fn hand_on(&mut self) {
        if let Some(d) = &mut self.digest {
            d.write(&self.buf);
        }
        self.bytes += self.buf.len() as u64;
        self.buf.clear();
    }
}

impl Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= 1 << 20 {
            self.hand_on();
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

    /// Writes the recording's start and stop and every entry (its length,
    /// then its bytes) to `path`.
    fn save(&self, path: &str, start: u64, stop: u64) -> Result<()> {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {path}"))?,
        );
        f.write_all(SAVED_MAGIC)?;
        f.write_all(&start.to_le_bytes())?;
        f.write_all(&stop.to_le_bytes())?;
        for e in self.entries() {
            f.write_all(&(e.len() as u32).to_le_bytes())?;
            f.write_all(e)?;
        }
        f.flush()?;
        Ok(())
    }

    /// What [`Captured::save`] wrote: the entries, the start and the stop.
    fn load(path: &str) -> Result<(Captured, u64, u64)> {
        let data = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        let bad = || anyhow::anyhow!("{path} is not a kernel_replay capture");
        let rest = data.strip_prefix(SAVED_MAGIC).ok_or_else(bad)?;
        let start = quad_le(rest, 0).ok_or_else(bad)?;
        let stop = quad_le(rest, 8).ok_or_else(bad)?;
        let mut at = 16;
        let mut captured = Captured::default();
        while at < rest.len() {
            let len = rest
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                .ok_or_else(bad)?;
            let entry = rest.get(at + 4..at + 4 + len).ok_or_else(bad)?;
            captured.bytes.extend_from_slice(entry);
            captured.ends.push(captured.bytes.len());
            at += 4 + len;
        }
        Ok((captured, start, stop))
    }
}

/// The first bytes of a saved capture.
const SAVED_MAGIC: &[u8; 8] = b"KRPLAY01";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dash = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let (opts, command) = (&args[..dash], args.get(dash + 1..).unwrap_or_default());
    let mut categories = vec!["kernel:syscall".to_owned(), "kernel:sched".to_owned()];
    let mut rounds = 5usize;
    let mut buffer_mb = 256usize;
    let (mut save, mut load, mut digest) = (None, None, false);
    let mut it = opts.iter();
    while let Some(o) = it.next() {
        if o == "--digest" {
            digest = true;
            continue;
        }
        let v = it.next().with_context(|| format!("{o} needs a value"))?;
        match o.as_str() {
            "--categories" => categories = v.split(',').map(str::to_owned).collect(),
            "--rounds" => rounds = v.parse()?,
            "--buffer-mb" => buffer_mb = v.parse()?,
            "--save" => save = Some(v.clone()),
            "--load" => load = Some(v.clone()),
            _ => bail!("unknown option {o}"),
        }
    }
    let (captured, start, stop) = match &load {
        Some(path) => Captured::load(path)?,
        None if command.is_empty() => bail!(
            "usage: kernel_replay [--categories CATS] [--rounds N] [--buffer-mb MB] \
             [--save FILE] [--digest] -- COMMAND... | kernel_replay --load FILE [--rounds N] [--digest]"
        ),
        None => record(categories, buffer_mb, command)?,
    };
    if let Some(path) = &save {
        captured.save(path, start, stop)?;
    }
    let events = captured.ends.len();
    if events == 0 {
        bail!("nothing captured");
    }

    // Replay, `rounds` times; the median round's rate is printed.
    let mut rates = Vec::new();
    let mut out_bytes = 0;
    for round in 0..rounds {
        let mut translator = KernelTranslator::new();
        translator.set_start(start);
        translator.set_stop(stop);
        let mut out = FxtStream::new(Buffer {
            digest: (digest && round == 0).then(DefaultHasher::new),
            ..Buffer::default()
        })?;
        let mut reorder = Reorder::default();
        let mut newest: Vec<u64> = Vec::new();
        let mut last_cpu = None;
        let mut failed = None;
        let mut translate = |bytes: &[u8]| {
            // As the manager's drain does it.
            let r = with_entry(bytes, |entry| translator.entry(&mut out, entry));
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
        let mut buffer = out.into_inner();
        buffer.hand_on();
        out_bytes = buffer.bytes;
        if let Some(d) = buffer.digest {
            println!("output digest {:016x} ({out_bytes} bytes)", d.finish());
        }
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

/// Records `command`'s kernel events of `categories`: the rings are read as
/// the manager reads them, and what comes out of them is kept undecoded.
/// Returns it with the recording's start and stop.
fn record(
    categories: Vec<String>,
    buffer_mb: usize,
    command: &[String],
) -> Result<(Captured, u64, u64)> {
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
    Ok((captured, start, stop))
}

fn word(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn quad_le(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn quad(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
