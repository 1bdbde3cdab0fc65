//! The controller's messages as bytes: the header, the encoder and the
//! decoder with its checks (no length is trusted), the payloads shared by
//! several messages, and how a stop result's provider stats are paged.

use alloc::string::String;
use alloc::vec::Vec;

use super::{
    FxtVersion, KernelCount, KernelStats, MAGIC, MAX_LIST_LEN, MAX_MESSAGE_BYTES,
    MAX_PROVIDER_STATS, MAX_STRING_LEN, ProviderSpec, ProviderStats, Reply, StackOptions,
    StopResult, TraceConfig, VERSION,
};
use crate::provider::BufferingMode;
use crate::provider::control::ControlError;

mod envelope;
#[cfg(test)]
mod tests;

/// Message kinds.
pub mod kind {
    /// Client → manager: the registered providers.
    pub const GET_PROVIDERS: u16 = 0x0101;
    /// Client → manager: the known categories.
    pub const GET_KNOWN_CATEGORIES: u16 = 0x0102;
    /// Client → manager: initialize a session (with the output descriptor).
    pub const INITIALIZE_TRACING: u16 = 0x0103;
    /// Client → manager: start tracing.
    pub const START_TRACING: u16 = 0x0104;
    /// Client → manager: stop tracing.
    pub const STOP_TRACING: u16 = 0x0105;
    /// Client → manager: the next alert.
    pub const WATCH_ALERT: u16 = 0x0106;
    /// Client → manager: end the session.
    pub const TERMINATE_TRACING: u16 = 0x0107;
    /// Client → manager: record this process too.
    pub const FOLLOW: u16 = 0x0108;
    /// Client → manager: how the session is going.
    pub const GET_STATUS: u16 = 0x0109;
    /// Client → manager: more of the last stop result's provider stats.
    pub const GET_PROVIDER_STATS: u16 = 0x010A;
    /// Client → manager: write what the flight recorder holds (with the
    /// output descriptor).
    pub const SNAPSHOT: u16 = 0x010B;
    /// Client → manager: the sessions that run.
    pub const GET_SESSIONS: u16 = 0x010C;
    /// Manager → client: the registered providers.
    pub const PROVIDERS: u16 = 0x0181;
    /// Manager → client: the known categories.
    pub const KNOWN_CATEGORIES: u16 = 0x0182;
    /// Manager → client: the session is initialized.
    pub const INITIALIZED: u16 = 0x0183;
    /// Manager → client: the answer to StartTracing.
    pub const START_RESULT: u16 = 0x0184;
    /// Manager → client: the answer to StopTracing.
    pub const STOP_RESULT: u16 = 0x0185;
    /// Manager → client: an alert.
    pub const ALERT: u16 = 0x0186;
    /// Manager → client: the session ended.
    pub const TERMINATED: u16 = 0x0187;
    /// Manager → client: the process is followed.
    pub const FOLLOWED: u16 = 0x0188;
    /// Manager → client: how the session is going.
    pub const STATUS: u16 = 0x0189;
    /// Manager → client: the session's state changed (an event).
    pub const STATE_CHANGED: u16 = 0x018A;
    /// Manager → client: the request failed.
    pub const FAILED: u16 = 0x018B;
    /// Manager → client: a page of the last stop result's provider stats.
    pub const PROVIDER_STATS: u16 = 0x018C;
    /// Manager → client: a snapshot was written.
    pub const SNAPSHOT_TAKEN: u16 = 0x018D;
    /// Manager → client: the sessions that run.
    pub const SESSIONS: u16 = 0x018E;
}

struct Encoder(Vec<u8>);

impl Encoder {
    fn new(kind: u16, txid: u32) -> Self {
        let mut e = Encoder(Vec::with_capacity(64));
        e.u32(MAGIC);
        e.u16(VERSION);
        e.u16(kind);
        e.u32(txid);
        e
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) -> Result<(), ControlError> {
        if s.len() > MAX_STRING_LEN {
            return Err(ControlError::TooLong("string"));
        }
        self.u16(s.len() as u16);
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
    fn count(&mut self, n: usize) -> Result<(), ControlError> {
        if n > MAX_LIST_LEN {
            return Err(ControlError::TooLong("list"));
        }
        self.u16(n as u16);
        Ok(())
    }
    fn strs(&mut self, items: &[String]) -> Result<(), ControlError> {
        self.count(items.len())?;
        items.iter().try_for_each(|s| self.str(s))
    }
    fn finish(self) -> Result<Vec<u8>, ControlError> {
        if self.0.len() > MAX_MESSAGE_BYTES {
            return Err(ControlError::TooLong("message"));
        }
        Ok(self.0)
    }
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn head(bytes: &'a [u8]) -> Result<(Self, u16, u32), ControlError> {
        let mut d = Decoder(bytes);
        if d.u32()? != MAGIC {
            return Err(ControlError::BadMagic);
        }
        let version = d.u16()?;
        if version != VERSION {
            return Err(ControlError::UnsupportedVersion(version));
        }
        let kind = d.u16()?;
        let txid = d.u32()?;
        Ok((d, kind, txid))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.0.len() < n {
            return Err(ControlError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ControlError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, ControlError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self, what: &'static str) -> Result<bool, ControlError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ControlError::BadValue(what)),
        }
    }
    fn u16(&mut self) -> Result<u16, ControlError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, ControlError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, ControlError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn str(&mut self) -> Result<String, ControlError> {
        let n = usize::from(self.u16()?);
        if n > MAX_STRING_LEN {
            return Err(ControlError::TooLong("string"));
        }
        core::str::from_utf8(self.take(n)?)
            .map(String::from)
            .map_err(|_| ControlError::NotUtf8)
    }
    /// A list's count, checked against what is left (each item takes at
    /// least `min_item` bytes), so a forged count cannot make us allocate.
    fn count(&mut self, min_item: usize) -> Result<usize, ControlError> {
        let n = usize::from(self.u16()?);
        if n > MAX_LIST_LEN {
            return Err(ControlError::TooLong("list"));
        }
        if n.saturating_mul(min_item) > self.0.len() {
            return Err(ControlError::Truncated);
        }
        Ok(n)
    }
    fn strs(&mut self) -> Result<Vec<String>, ControlError> {
        let n = self.count(2)?;
        (0..n).map(|_| self.str()).collect()
    }
    fn mode(&mut self) -> Result<BufferingMode, ControlError> {
        BufferingMode::from_header_value(self.u8()?).ok_or(ControlError::BadValue("buffering mode"))
    }
    fn end(self) -> Result<(), ControlError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ControlError::TrailingBytes)
        }
    }
}

impl TraceConfig {
    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        e.strs(&self.categories)?;
        e.u32(self.buffer_size_megabytes_hint);
        e.u64(self.start_timeout_milliseconds);
        e.u8(self.buffering_mode.header_value());
        e.count(self.provider_specs.len())?;
        for s in &self.provider_specs {
            e.str(&s.name)?;
            e.u32(s.buffer_size_megabytes_hint);
            e.strs(&s.categories)?;
        }
        e.u32(self.version.major);
        e.u32(self.version.minor);
        e.bool(self.defer_transfer);
        e.u64(self.kernel_buffer_bytes);
        e.u8(self.kernel_buffering_mode.header_value());
        match &self.pids {
            None => e.bool(false),
            Some(pids) => {
                e.bool(true);
                e.count(pids.len())?;
                pids.iter().for_each(|&p| e.u32(p));
            }
        }
        e.strs(&self.uprobes)?;
        e.strs(&self.usdt)?;
        e.strs(&self.tracepoints)?;
        e.u32(self.stacks.sample_hz);
        e.u64(self.stacks.offcpu_min_us);
        e.bool(self.stacks.frame_pointers);
        e.u32(self.stacks.stack_bytes);
        e.strs(&self.stacks.probe_stacks)?;
        e.strs(&self.triggers)?;
        e.strs(&self.cgroups)
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, ControlError> {
        let categories = d.strs()?;
        let buffer_size_megabytes_hint = d.u32()?;
        let start_timeout_milliseconds = d.u64()?;
        let buffering_mode = d.mode()?;
        let n = d.count(8)?;
        let provider_specs = (0..n)
            .map(|_| {
                Ok(ProviderSpec {
                    name: d.str()?,
                    buffer_size_megabytes_hint: d.u32()?,
                    categories: d.strs()?,
                })
            })
            .collect::<Result<_, ControlError>>()?;
        let version = FxtVersion {
            major: d.u32()?,
            minor: d.u32()?,
        };
        let defer_transfer = d.bool("defer_transfer")?;
        let kernel_buffer_bytes = d.u64()?;
        let kernel_buffering_mode = d.mode()?;
        let pids = if d.bool("pid filter flag")? {
            let n = d.count(4)?;
            Some((0..n).map(|_| d.u32()).collect::<Result<_, _>>()?)
        } else {
            None
        };
        Ok(TraceConfig {
            categories,
            buffer_size_megabytes_hint,
            start_timeout_milliseconds,
            buffering_mode,
            provider_specs,
            version,
            defer_transfer,
            kernel_buffer_bytes,
            kernel_buffering_mode,
            pids,
            uprobes: d.strs()?,
            usdt: d.strs()?,
            tracepoints: d.strs()?,
            stacks: StackOptions {
                sample_hz: d.u32()?,
                offcpu_min_us: d.u64()?,
                frame_pointers: d.bool("frame_pointers")?,
                stack_bytes: d.u32()?,
                probe_stacks: d.strs()?,
            },
            triggers: d.strs()?,
            cgroups: d.strs()?,
        })
    }
}

impl ProviderStats {
    /// The fewest bytes one takes in a message (an empty name).
    const MIN_ENCODED_LEN: usize = 41;

    /// The bytes it takes in a message.
    pub fn encoded_len(&self) -> usize {
        Self::MIN_ENCODED_LEN + self.name.len()
    }

    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        e.u32(self.id);
        e.str(&self.name)?;
        e.u32(self.pid as u32);
        e.u64(self.records_written);
        e.u64(self.bytes_written);
        e.u64(self.records_dropped);
        e.u32(self.buffer_wrapped_count);
        e.u8(self.percentage_durable_buffer_used);
        e.bool(self.started);
        e.bool(self.aborted);
        Ok(())
    }

    fn encode_list(list: &[ProviderStats], e: &mut Encoder) -> Result<(), ControlError> {
        e.count(list.len())?;
        list.iter().try_for_each(|s| s.encode(e))
    }

    /// A list of them, its count checked against the bytes left.
    fn decode_list(d: &mut Decoder<'_>) -> Result<Vec<ProviderStats>, ControlError> {
        let n = d.count(Self::MIN_ENCODED_LEN)?;
        (0..n)
            .map(|_| {
                let id = d.u32()?;
                let name = d.str()?;
                Ok(ProviderStats {
                    id,
                    name,
                    pid: d.u32()? as i32,
                    records_written: d.u64()?,
                    bytes_written: d.u64()?,
                    records_dropped: d.u64()?,
                    buffer_wrapped_count: d.u32()?,
                    percentage_durable_buffer_used: match d.u8()? {
                        p @ 0..=100 => p,
                        _ => return Err(ControlError::BadValue("buffer usage")),
                    },
                    started: d.bool("started")?,
                    aborted: d.bool("aborted")?,
                })
            })
            .collect()
    }
}

/// How many of `stats`, from the first, fit in `room` bytes of a message
/// (and in one list).
fn stats_that_fit(stats: &[ProviderStats], mut room: usize) -> usize {
    let mut n = 0;
    for s in stats.iter().take(MAX_LIST_LEN) {
        let len = s.encoded_len();
        if len > room {
            break;
        }
        room -= len;
        n += 1;
    }
    n
}

/// The page of `all` from `offset` that one [`Reply::ProviderStats`]
/// holds; the answer to [`Request::GetProviderStats`](super::Request::GetProviderStats). `None` when
/// `offset` is past the end (at the end: an empty page).
pub fn provider_stats_page(all: &[ProviderStats], offset: u32) -> Option<Reply> {
    let rest = all.get(offset as usize..)?;
    let head = Encoder::new(kind::PROVIDER_STATS, 0).0.len() + 4 + 4 + 2;
    let n = stats_that_fit(rest, MAX_MESSAGE_BYTES.saturating_sub(head));
    Some(Reply::ProviderStats {
        offset,
        total: all.len() as u32,
        stats: rest[..n].to_vec(),
    })
}

impl StopResult {
    /// This result as one message holds it, and every provider's stats:
    /// `providers_total` counts them all, `provider_stats` keeps the first
    /// that fit beside the rest of the result; the caller keeps the list
    /// for [`Request::GetProviderStats`](super::Request::GetProviderStats) ([`provider_stats_page`]).
    pub fn paged(mut self) -> (StopResult, Vec<ProviderStats>) {
        let all = core::mem::take(&mut self.provider_stats);
        self.providers_total = all.len().min(MAX_PROVIDER_STATS) as u32;
        let mut e = Encoder::new(kind::STOP_RESULT, 0);
        e.u32(0);
        let rest = match self.encode(&mut e) {
            Ok(()) => e.0.len(),
            Err(_) => MAX_MESSAGE_BYTES,
        };
        let n = stats_that_fit(&all, MAX_MESSAGE_BYTES.saturating_sub(rest));
        self.provider_stats = all[..n].to_vec();
        (self, all)
    }

    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        let total = (self.providers_total as usize).max(self.provider_stats.len());
        if total > MAX_PROVIDER_STATS {
            return Err(ControlError::TooLong("provider total"));
        }
        e.u32(total as u32);
        ProviderStats::encode_list(&self.provider_stats, e)?;
        let k = &self.kernel;
        e.u64(k.events);
        e.u64(k.dropped);
        e.count(k.dropped_per_cpu.len())?;
        for &(cpu, n) in &k.dropped_per_cpu {
            e.u32(cpu);
            e.u64(n);
        }
        e.u64(k.malformed);
        e.count(k.counts.len())?;
        for (kind, n) in &k.counts {
            kind.encode(e)?;
            e.u64(*n);
        }
        e.strs(&k.categories)?;
        e.u64(self.records);
        e.u64(self.bytes);
        e.u64(self.traced_ns);
        Ok(())
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, ControlError> {
        let providers_total = d.u32()?;
        if providers_total as usize > MAX_PROVIDER_STATS {
            return Err(ControlError::TooLong("provider total"));
        }
        let provider_stats = ProviderStats::decode_list(d)?;
        if provider_stats.len() > providers_total as usize {
            return Err(ControlError::BadValue("provider total"));
        }
        let events = d.u64()?;
        let dropped = d.u64()?;
        let n = d.count(12)?;
        let dropped_per_cpu = (0..n)
            .map(|_| Ok((d.u32()?, d.u64()?)))
            .collect::<Result<_, ControlError>>()?;
        let malformed = d.u64()?;
        let n = d.count(10)?;
        let counts = (0..n)
            .map(|_| Ok((KernelCount::decode(d)?, d.u64()?)))
            .collect::<Result<_, ControlError>>()?;
        Ok(StopResult {
            provider_stats,
            providers_total,
            kernel: KernelStats {
                events,
                dropped,
                dropped_per_cpu,
                malformed,
                counts,
                categories: d.strs()?,
            },
            records: d.u64()?,
            bytes: d.u64()?,
            traced_ns: d.u64()?,
        })
    }
}

/// Whether `bytes` starts like a controller message (any version), as
/// opposed to a provider's registration.
pub fn is_controller_message(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && bytes[..4] == MAGIC.to_le_bytes()
}

/// A kernel count on the wire: its value, then a tracepoint's name.
impl KernelCount {
    fn encode(&self, e: &mut Encoder) -> Result<(), ControlError> {
        e.u16(self.value());
        match self {
            KernelCount::Tracepoint(name) => e.str(name),
            _ => Ok(()),
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self, ControlError> {
        let value = d.u16()?;
        if value == 0x100 {
            return Ok(KernelCount::Tracepoint(d.str()?));
        }
        KernelCount::FIXED
            .into_iter()
            .find(|k| k.value() == value)
            .ok_or(ControlError::BadValue("kernel count kind"))
    }
}
