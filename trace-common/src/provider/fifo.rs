//! The FIFO packets between a provider and the manager (fxt-format.md §7.5).
//!
//! Every packet is 16 bytes: `{u16 request, u16 data16, u32 data32,
//! u64 data64}`, little-endian. On Linux they travel over a
//! `SOCK_SEQPACKET` socket pair, one packet per datagram.

/// Size of one packet.
pub const PACKET_BYTES: usize = 16;

/// The FIFO protocol version a provider reports in STARTED.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest alert name, in bytes.
pub const MAX_ALERT_NAME_LEN: usize = 14;

/// Request codes.
pub mod code {
    /// Provider → manager: tracing started; data32 = protocol version.
    pub const STARTED: u16 = 0x0001;
    /// Provider → manager (streaming): a rolling buffer is full;
    /// data32 = wrapped count, data64 = durable data end.
    pub const SAVE_BUFFER: u16 = 0x0002;
    /// Provider → manager: tracing stopped, every record is written.
    pub const STOPPED: u16 = 0x0003;
    /// Provider → manager: an alert; bytes 2..16 hold its name.
    pub const ALERT: u16 = 0x0004;
    /// Provider → manager: one of its threads wrote its first record of
    /// the trace; data32 = the thread's id as the provider sees it (in its
    /// PID namespace), so that the manager can find the host's id while
    /// the thread lives.
    pub const NEW_THREAD: u16 = 0x0005;
    /// Manager → provider (streaming): the buffer is saved; echoes
    /// SAVE_BUFFER's data32 and data64.
    pub const BUFFER_SAVED: u16 = 0x0100;
}

/// One raw packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// The request code.
    pub request: u16,
    /// Zero except in ALERT.
    pub data16: u16,
    /// First argument.
    pub data32: u32,
    /// Second argument.
    pub data64: u64,
}

impl Packet {
    /// The packet's 16 bytes.
    pub fn to_bytes(&self) -> [u8; PACKET_BYTES] {
        let mut b = [0u8; PACKET_BYTES];
        b[0..2].copy_from_slice(&self.request.to_le_bytes());
        b[2..4].copy_from_slice(&self.data16.to_le_bytes());
        b[4..8].copy_from_slice(&self.data32.to_le_bytes());
        b[8..16].copy_from_slice(&self.data64.to_le_bytes());
        b
    }

    /// The packet in `b`.
    pub fn from_bytes(b: &[u8; PACKET_BYTES]) -> Packet {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[8..16]);
        Packet {
            request: u16::from_le_bytes([b[0], b[1]]),
            data16: u16::from_le_bytes([b[2], b[3]]),
            data32: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            data64: u64::from_le_bytes(w),
        }
    }
}

/// A short alert name: at most [`MAX_ALERT_NAME_LEN`] bytes, no NUL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlertName {
    bytes: [u8; MAX_ALERT_NAME_LEN],
    len: u8,
}

impl AlertName {
    /// The name `s`, if it is short enough, non-empty and has no NUL byte.
    pub fn new(s: &str) -> Option<AlertName> {
        if s.is_empty() || s.len() > MAX_ALERT_NAME_LEN || s.bytes().any(|b| b == 0) {
            return None;
        }
        let mut bytes = [0u8; MAX_ALERT_NAME_LEN];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        Some(AlertName {
            bytes,
            len: s.len() as u8,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

/// A packet a provider sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromProvider {
    /// Tracing started, speaking `version` of the protocol.
    Started {
        /// The FIFO protocol version.
        version: u32,
    },
    /// A rolling buffer is full (streaming mode).
    SaveBuffer {
        /// Switches between rolling buffers so far, before this one.
        wrapped_count: u32,
        /// End of the data in the durable buffer.
        durable_data_end: u64,
    },
    /// Tracing stopped; every record is in the buffer.
    Stopped,
    /// An alert was raised.
    Alert(AlertName),
    /// A thread, `tid` in the provider's PID namespace, wrote its first
    /// record of the trace.
    NewThread {
        /// The thread's id as the provider sees it.
        tid: u32,
    },
}

/// A packet the manager sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FromManager {
    /// A buffer was saved; the values echo [`FromProvider::SaveBuffer`].
    BufferSaved {
        /// As in the save request.
        wrapped_count: u32,
        /// As in the save request.
        durable_data_end: u64,
    },
}

/// Why a packet is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketError {
    /// The request code is not one this side accepts.
    UnknownRequest(u16),
    /// A field that must be zero is not.
    NonZeroField(u16),
    /// STARTED with a protocol version other than [`PROTOCOL_VERSION`].
    UnsupportedVersion(u32),
    /// An ALERT whose name is empty or not UTF-8.
    BadAlertName,
}

impl core::fmt::Display for PacketError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PacketError::UnknownRequest(r) => write!(f, "unknown FIFO request {r:#06x}"),
            PacketError::NonZeroField(r) => {
                write!(f, "FIFO request {r:#06x} has a non-zero reserved field")
            }
            PacketError::UnsupportedVersion(v) => {
                write!(f, "unsupported FIFO protocol version {v}")
            }
            PacketError::BadAlertName => f.write_str("ALERT packet with an invalid name"),
        }
    }
}

impl core::error::Error for PacketError {}

impl FromProvider {
    /// The raw packet.
    pub fn to_packet(&self) -> Packet {
        match *self {
            FromProvider::Started { version } => Packet {
                request: code::STARTED,
                data32: version,
                ..Packet::default()
            },
            FromProvider::SaveBuffer {
                wrapped_count,
                durable_data_end,
            } => Packet {
                request: code::SAVE_BUFFER,
                data16: 0,
                data32: wrapped_count,
                data64: durable_data_end,
            },
            FromProvider::Stopped => Packet {
                request: code::STOPPED,
                ..Packet::default()
            },
            FromProvider::NewThread { tid } => Packet {
                request: code::NEW_THREAD,
                data32: tid,
                ..Packet::default()
            },
            FromProvider::Alert(name) => {
                let mut b = [0u8; PACKET_BYTES];
                b[0..2].copy_from_slice(&code::ALERT.to_le_bytes());
                b[2..2 + usize::from(name.len)]
                    .copy_from_slice(&name.bytes[..usize::from(name.len)]);
                Packet::from_bytes(&b)
            }
        }
    }

    /// Checks a packet as the manager must (fxt-format.md §7.5).
    pub fn parse(p: &Packet) -> Result<FromProvider, PacketError> {
        if p.request != code::ALERT && p.data16 != 0 {
            return Err(PacketError::NonZeroField(p.request));
        }
        match p.request {
            code::STARTED => {
                if p.data32 != PROTOCOL_VERSION {
                    Err(PacketError::UnsupportedVersion(p.data32))
                } else if p.data64 != 0 {
                    Err(PacketError::NonZeroField(p.request))
                } else {
                    Ok(FromProvider::Started { version: p.data32 })
                }
            }
            code::SAVE_BUFFER => Ok(FromProvider::SaveBuffer {
                wrapped_count: p.data32,
                durable_data_end: p.data64,
            }),
            code::STOPPED => {
                if p.data32 != 0 || p.data64 != 0 {
                    Err(PacketError::NonZeroField(p.request))
                } else {
                    Ok(FromProvider::Stopped)
                }
            }
            code::NEW_THREAD => {
                if p.data64 != 0 {
                    Err(PacketError::NonZeroField(p.request))
                } else {
                    Ok(FromProvider::NewThread { tid: p.data32 })
                }
            }
            code::ALERT => {
                let b = p.to_bytes();
                let raw = &b[2..];
                let len = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
                core::str::from_utf8(&raw[..len])
                    .ok()
                    .and_then(AlertName::new)
                    .map(FromProvider::Alert)
                    .ok_or(PacketError::BadAlertName)
            }
            other => Err(PacketError::UnknownRequest(other)),
        }
    }
}

impl FromManager {
    /// The raw packet.
    pub fn to_packet(&self) -> Packet {
        match *self {
            FromManager::BufferSaved {
                wrapped_count,
                durable_data_end,
            } => Packet {
                request: code::BUFFER_SAVED,
                data16: 0,
                data32: wrapped_count,
                data64: durable_data_end,
            },
        }
    }

    /// Checks a packet as a provider must (fxt-format.md §7.5).
    pub fn parse(p: &Packet) -> Result<FromManager, PacketError> {
        if p.data16 != 0 {
            return Err(PacketError::NonZeroField(p.request));
        }
        match p.request {
            code::BUFFER_SAVED => Ok(FromManager::BufferSaved {
                wrapped_count: p.data32,
                durable_data_end: p.data64,
            }),
            other => Err(PacketError::UnknownRequest(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip() {
        for m in [
            FromProvider::Started { version: 1 },
            FromProvider::SaveBuffer {
                wrapped_count: 7,
                durable_data_end: 4096,
            },
            FromProvider::Stopped,
            FromProvider::Alert(AlertName::new("oom-soon").unwrap()),
            FromProvider::Alert(AlertName::new("fourteen-bytes").unwrap()),
        ] {
            let p = m.to_packet();
            assert_eq!(Packet::from_bytes(&p.to_bytes()), p);
            assert_eq!(FromProvider::parse(&p), Ok(m));
        }
        let saved = FromManager::BufferSaved {
            wrapped_count: 3,
            durable_data_end: 16,
        };
        assert_eq!(FromManager::parse(&saved.to_packet()), Ok(saved));
    }

    #[test]
    fn manager_rejects_what_the_protocol_forbids() {
        let bad = [
            Packet {
                request: 0,
                ..Packet::default()
            },
            Packet {
                request: code::STARTED,
                data32: 2,
                ..Packet::default()
            },
            Packet {
                request: code::STARTED,
                data32: 1,
                data64: 1,
                ..Packet::default()
            },
            Packet {
                request: code::STOPPED,
                data16: 1,
                ..Packet::default()
            },
            Packet {
                request: code::ALERT,
                ..Packet::default()
            },
            Packet {
                request: code::BUFFER_SAVED,
                ..Packet::default()
            },
        ];
        for p in bad {
            assert!(FromProvider::parse(&p).is_err(), "{p:?}");
        }
        assert!(AlertName::new("fifteen-bytes!!").is_none());
        assert!(
            FromManager::parse(&Packet {
                request: code::STARTED,
                ..Packet::default()
            })
            .is_err()
        );
    }
}
