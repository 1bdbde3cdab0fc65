//! Every request and reply encoded and decoded, whole.

use alloc::vec::Vec;

use super::{Decoder, Encoder, kind};
use crate::controller::{
    Envelope, MAX_PROVIDER_STATS, MAX_PROVIDERS, MAX_SESSIONS, OLDEST_READABLE_FAILED,
    ProviderInfo, ProviderProgress, ProviderStats, Reply, Request, SessionInfo, SessionKind,
    SessionState, SnapshotResult, StartError, StartOptions, Status, StopError, StopResult,
    TraceConfig, VERSION,
};
use crate::provider::BufferDisposition;
use crate::provider::control::ControlError;

impl Envelope<Request> {
    /// The message's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let t = self.txid;
        let e = match &self.body {
            Request::GetProviders => Encoder::new(kind::GET_PROVIDERS, t),
            Request::GetKnownCategories => Encoder::new(kind::GET_KNOWN_CATEGORIES, t),
            Request::InitializeTracing(config) => {
                let mut e = Encoder::new(kind::INITIALIZE_TRACING, t);
                config.encode(&mut e)?;
                e
            }
            Request::StartTracing(o) => {
                let mut e = Encoder::new(kind::START_TRACING, t);
                e.u8(o.buffer_disposition.value());
                e.strs(&o.additional_categories)?;
                e
            }
            Request::StopTracing { write_results } => {
                let mut e = Encoder::new(kind::STOP_TRACING, t);
                e.bool(*write_results);
                e
            }
            Request::WatchAlert => Encoder::new(kind::WATCH_ALERT, t),
            Request::TerminateTracing => Encoder::new(kind::TERMINATE_TRACING, t),
            Request::Follow { pid } => {
                let mut e = Encoder::new(kind::FOLLOW, t);
                e.u32(*pid);
                e
            }
            Request::GetStatus => Encoder::new(kind::GET_STATUS, t),
            Request::GetProviderStats { offset } => {
                let mut e = Encoder::new(kind::GET_PROVIDER_STATS, t);
                e.u32(*offset);
                e
            }
            Request::Snapshot => Encoder::new(kind::SNAPSHOT, t),
            Request::GetSessions => Encoder::new(kind::GET_SESSIONS, t),
        };
        e.finish()
    }

    /// The request in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, ControlError> {
        let (mut d, k, txid) = Decoder::head(bytes)?;
        let body = match k {
            kind::GET_PROVIDERS => Request::GetProviders,
            kind::GET_KNOWN_CATEGORIES => Request::GetKnownCategories,
            kind::INITIALIZE_TRACING => Request::InitializeTracing(TraceConfig::decode(&mut d)?),
            kind::START_TRACING => Request::StartTracing(StartOptions {
                buffer_disposition: BufferDisposition::from_value(d.u8()?)
                    .ok_or(ControlError::BadValue("buffer disposition"))?,
                additional_categories: d.strs()?,
            }),
            kind::STOP_TRACING => Request::StopTracing {
                write_results: d.bool("write_results")?,
            },
            kind::WATCH_ALERT => Request::WatchAlert,
            kind::TERMINATE_TRACING => Request::TerminateTracing,
            kind::FOLLOW => Request::Follow { pid: d.u32()? },
            kind::GET_STATUS => Request::GetStatus,
            kind::GET_PROVIDER_STATS => Request::GetProviderStats { offset: d.u32()? },
            kind::SNAPSHOT => Request::Snapshot,
            kind::GET_SESSIONS => Request::GetSessions,
            other => return Err(ControlError::UnknownKind(other)),
        };
        d.end()?;
        Ok(Envelope { txid, body })
    }
}

impl Envelope<Reply> {
    /// The message's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let t = self.txid;
        let e = match &self.body {
            Reply::Providers(list) => {
                let mut e = Encoder::new(kind::PROVIDERS, t);
                if list.len() > MAX_PROVIDERS {
                    return Err(ControlError::TooLong("provider list"));
                }
                e.count(list.len())?;
                for p in list {
                    e.u32(p.id);
                    e.str(&p.name)?;
                    e.u32(p.pid as u32);
                    e.str(&p.state)?;
                    e.strs(&p.categories)?;
                }
                e
            }
            Reply::KnownCategories(list) => {
                let mut e = Encoder::new(kind::KNOWN_CATEGORIES, t);
                e.count(list.len())?;
                for (name, description) in list {
                    e.str(name)?;
                    e.str(description)?;
                }
                e
            }
            Reply::Initialized => Encoder::new(kind::INITIALIZED, t),
            Reply::StartResult(r) => {
                let mut e = Encoder::new(kind::START_RESULT, t);
                e.u32(r.err().map_or(0, StartError::value));
                e
            }
            Reply::StopResult(r) => {
                let mut e = Encoder::new(kind::STOP_RESULT, t);
                match r {
                    Ok(result) => {
                        e.u32(0);
                        result.encode(&mut e)?;
                    }
                    Err(err) => e.u32(err.value()),
                }
                e
            }
            Reply::Alert { name, provider } => {
                let mut e = Encoder::new(kind::ALERT, t);
                e.str(name)?;
                e.str(provider)?;
                e
            }
            Reply::Terminated(result) => {
                let mut e = Encoder::new(kind::TERMINATED, t);
                result.encode(&mut e)?;
                e
            }
            Reply::Followed => Encoder::new(kind::FOLLOWED, t),
            Reply::Status(s) => {
                let mut e = Encoder::new(kind::STATUS, t);
                e.u32(s.state.map_or(0, SessionState::value));
                e.u64(s.elapsed_ns);
                e.u64(s.kernel_events);
                e.u64(s.bytes);
                e.u64(s.dropped);
                e.u16(s.kernel_fill_permille);
                e.u32(s.providers);
                e.u32(s.providers_started);
                e.count(s.provider_progress.len())?;
                for p in &s.provider_progress {
                    e.str(&p.name)?;
                    e.u16(p.fill_permille);
                    e.u64(p.dropped);
                    e.u64(p.bytes_written);
                }
                e
            }
            Reply::StateChanged(state) => {
                let mut e = Encoder::new(kind::STATE_CHANGED, t);
                e.u32(state.value());
                e
            }
            Reply::ProviderStats {
                offset,
                total,
                stats,
            } => {
                let end = (*offset as usize).checked_add(stats.len());
                if end.is_none_or(|end| end > *total as usize)
                    || *total as usize > MAX_PROVIDER_STATS
                {
                    return Err(ControlError::BadValue("provider stats page"));
                }
                let mut e = Encoder::new(kind::PROVIDER_STATS, t);
                e.u32(*offset);
                e.u32(*total);
                ProviderStats::encode_list(stats, &mut e)?;
                e
            }
            Reply::Snapshot(r) => {
                let mut e = Encoder::new(kind::SNAPSHOT_TAKEN, t);
                e.u64(r.bytes);
                e.u64(r.records);
                e
            }
            Reply::Sessions(list) => {
                let mut e = Encoder::new(kind::SESSIONS, t);
                if list.len() > MAX_SESSIONS {
                    return Err(ControlError::TooLong("session list"));
                }
                e.count(list.len())?;
                for s in list {
                    e.u8(s.kind.value());
                    e.u32(s.owner_pid as u32);
                    e.str(&s.state)?;
                    e.strs(&s.categories)?;
                    e.u64(s.elapsed_ns);
                    e.u64(s.bytes);
                    e.u64(s.dropped);
                    e.u64(s.window_ns);
                }
                e
            }
            Reply::Failed {
                fatal,
                code,
                message,
            } => {
                let mut e = Encoder::new(kind::FAILED, t);
                e.bool(*fatal);
                e.u32(*code);
                e.str(message)?;
                e
            }
        };
        e.finish()
    }

    /// The reply in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, ControlError> {
        let (mut d, k, txid) = Decoder::head(bytes)?;
        let body = match k {
            kind::PROVIDERS => {
                let n = d.count(14)?;
                if n > MAX_PROVIDERS {
                    return Err(ControlError::TooLong("provider list"));
                }
                Reply::Providers(
                    (0..n)
                        .map(|_| {
                            Ok(ProviderInfo {
                                id: d.u32()?,
                                name: d.str()?,
                                pid: d.u32()? as i32,
                                state: d.str()?,
                                categories: d.strs()?,
                            })
                        })
                        .collect::<Result<_, ControlError>>()?,
                )
            }
            kind::KNOWN_CATEGORIES => {
                let n = d.count(4)?;
                Reply::KnownCategories((0..n).map(|_| Ok((d.str()?, d.str()?))).collect::<Result<
                    _,
                    ControlError,
                >>(
                )?)
            }
            kind::INITIALIZED => Reply::Initialized,
            kind::START_RESULT => Reply::StartResult(match d.u32()? {
                0 => Ok(()),
                v => Err(StartError::from_value(v).ok_or(ControlError::BadValue("start error"))?),
            }),
            kind::STOP_RESULT => Reply::StopResult(match d.u32()? {
                0 => Ok(StopResult::decode(&mut d)?),
                v => Err(StopError::from_value(v).ok_or(ControlError::BadValue("stop error"))?),
            }),
            kind::ALERT => Reply::Alert {
                name: d.str()?,
                provider: d.str()?,
            },
            kind::TERMINATED => Reply::Terminated(StopResult::decode(&mut d)?),
            kind::FOLLOWED => Reply::Followed,
            kind::STATUS => Reply::Status(Status {
                state: match d.u32()? {
                    0 => None,
                    v => Some(SessionState::from_value(v).ok_or(ControlError::BadValue("state"))?),
                },
                elapsed_ns: d.u64()?,
                kernel_events: d.u64()?,
                bytes: d.u64()?,
                dropped: d.u64()?,
                kernel_fill_permille: d.u16()?,
                providers: d.u32()?,
                providers_started: d.u32()?,
                provider_progress: {
                    let n = d.count(20)?;
                    (0..n)
                        .map(|_| {
                            Ok(ProviderProgress {
                                name: d.str()?,
                                fill_permille: d.u16()?,
                                dropped: d.u64()?,
                                bytes_written: d.u64()?,
                            })
                        })
                        .collect::<Result<_, ControlError>>()?
                },
            }),
            kind::STATE_CHANGED => Reply::StateChanged(
                SessionState::from_value(d.u32()?).ok_or(ControlError::BadValue("state"))?,
            ),
            kind::PROVIDER_STATS => {
                let offset = d.u32()?;
                let total = d.u32()?;
                if total as usize > MAX_PROVIDER_STATS || offset > total {
                    return Err(ControlError::BadValue("provider stats page"));
                }
                let stats = ProviderStats::decode_list(&mut d)?;
                if stats.len() > (total - offset) as usize {
                    return Err(ControlError::BadValue("provider stats page"));
                }
                Reply::ProviderStats {
                    offset,
                    total,
                    stats,
                }
            }
            kind::SNAPSHOT_TAKEN => Reply::Snapshot(SnapshotResult {
                bytes: d.u64()?,
                records: d.u64()?,
            }),
            kind::SESSIONS => {
                let n = d.count(45)?;
                if n > MAX_SESSIONS {
                    return Err(ControlError::TooLong("session list"));
                }
                Reply::Sessions(
                    (0..n)
                        .map(|_| {
                            Ok(SessionInfo {
                                kind: SessionKind::from_value(d.u8()?)
                                    .ok_or(ControlError::BadValue("session kind"))?,
                                owner_pid: d.u32()? as i32,
                                state: d.str()?,
                                categories: d.strs()?,
                                elapsed_ns: d.u64()?,
                                bytes: d.u64()?,
                                dropped: d.u64()?,
                                window_ns: d.u64()?,
                            })
                        })
                        .collect::<Result<_, ControlError>>()?,
                )
            }
            kind::FAILED => Reply::Failed {
                fatal: d.bool("fatal")?,
                code: d.u32()?,
                message: d.str()?,
            },
            other => return Err(ControlError::UnknownKind(other)),
        };
        d.end()?;
        Ok(Envelope { txid, body })
    }
}

impl Envelope<Reply> {
    /// A [`Reply::Failed`] with `version` in its header, for a client that
    /// speaks `version` (from [`OLDEST_READABLE_FAILED`] to [`VERSION`],
    /// whose Failed is laid out as this one's): how a manager tells it that
    /// it does not speak its version. `None` for any other version or
    /// reply.
    pub fn encode_failed_as(&self, version: u16) -> Option<Vec<u8>> {
        if !(OLDEST_READABLE_FAILED..=VERSION).contains(&version)
            || !matches!(self.body, Reply::Failed { .. })
        {
            return None;
        }
        let mut bytes = self.encode().ok()?;
        bytes[4..6].copy_from_slice(&version.to_le_bytes());
        Some(bytes)
    }
}
