//! Messages on the registration socket (a `SOCK_SEQPACKET` Unix socket),
//! one message per datagram.
//!
//! Every message starts with `u32 magic, u16 version, u16 kind`, all
//! little-endian. Strings are a `u8` length and UTF-8 bytes; lists a `u8`
//! count and their items. File descriptors travel beside
//! [`ManagerMessage::Initialize`] as `SCM_RIGHTS`: the buffer memfd first,
//! then the provider's end of the FIFO socket pair.

use alloc::string::String;
use alloc::vec::Vec;

use super::clock::ClockKind;
use super::{
    BufferDisposition, BufferingMode, MAX_CATEGORIES, MAX_CATEGORY_NAME_LEN, MAX_PROVIDER_NAME_LEN,
};

/// First word of every message ("TMCP" in memory).
pub const MAGIC: u32 = 0x5043_4D54;

/// The control protocol version.
pub const VERSION: u16 = 1;

/// The largest message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// Message kinds.
pub mod kind {
    /// Provider → manager: register.
    pub const REGISTER: u16 = 0x0001;
    /// Manager → provider: registered.
    pub const REGISTERED: u16 = 0x0081;
    /// Manager → provider: initialize (with two file descriptors).
    pub const INITIALIZE: u16 = 0x0082;
    /// Manager → provider: start.
    pub const START: u16 = 0x0083;
    /// Manager → provider: stop.
    pub const STOP: u16 = 0x0084;
    /// Manager → provider: terminate.
    pub const TERMINATE: u16 = 0x0085;
}

/// What a provider sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderMessage {
    /// Registers the provider (synchronously: the manager answers with
    /// [`ManagerMessage::Registered`]). The pid comes from the socket.
    Register {
        /// The provider's name, at most [`MAX_PROVIDER_NAME_LEN`] bytes.
        name: String,
        /// The clock its timestamps come from (one byte, see
        /// [`ClockKind::value`]).
        clock: ClockKind,
        /// Categories the provider knows it writes (may be empty).
        categories: Vec<String>,
    },
}

/// What the manager sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManagerMessage {
    /// The answer to [`ProviderMessage::Register`].
    Registered {
        /// The provider's id in traces.
        provider_id: u32,
        /// Whether a trace is already running (Initialize follows).
        tracing_started: bool,
    },
    /// Prepare to trace into the attached buffer.
    Initialize {
        /// What to do when the buffer fills.
        mode: BufferingMode,
        /// The enabled categories; empty enables every category.
        categories: Vec<String>,
    },
    /// Begin tracing.
    Start {
        /// How to clear the buffer first.
        disposition: BufferDisposition,
        /// Categories to enable besides Initialize's.
        additional_categories: Vec<String>,
    },
    /// Stop tracing.
    Stop,
    /// Stop if needed, then let go of the buffer and the FIFO.
    Terminate,
}

/// Why a message is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// The message ended early.
    Truncated,
    /// The message has bytes after its last field.
    TrailingBytes,
    /// The first word is not [`MAGIC`].
    BadMagic,
    /// The version is not [`VERSION`].
    UnsupportedVersion(u16),
    /// The kind is not one this side accepts.
    UnknownKind(u16),
    /// A field holds a value outside its range.
    BadValue(&'static str),
    /// A string or list is longer than the protocol allows.
    TooLong(&'static str),
    /// A string is not UTF-8.
    NotUtf8,
}

impl core::fmt::Display for ControlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ControlError::Truncated => f.write_str("control message is truncated"),
            ControlError::TrailingBytes => f.write_str("control message has trailing bytes"),
            ControlError::BadMagic => f.write_str("not a trace control message (bad magic)"),
            ControlError::UnsupportedVersion(v) => {
                write!(f, "unsupported control protocol version {v}")
            }
            ControlError::UnknownKind(k) => write!(f, "unknown control message kind {k:#06x}"),
            ControlError::BadValue(what) => write!(f, "control message has a bad {what}"),
            ControlError::TooLong(what) => write!(f, "control message {what} is too long"),
            ControlError::NotUtf8 => f.write_str("control message string is not UTF-8"),
        }
    }
}

impl core::error::Error for ControlError {}

struct Encoder(Vec<u8>);

impl Encoder {
    fn new(kind: u16) -> Self {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(&MAGIC.to_le_bytes());
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&kind.to_le_bytes());
        Encoder(v)
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str, max: usize, what: &'static str) -> Result<(), ControlError> {
        if s.len() > max {
            return Err(ControlError::TooLong(what));
        }
        self.u8(s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
    fn list(&mut self, items: &[String]) -> Result<(), ControlError> {
        if items.len() > MAX_CATEGORIES {
            return Err(ControlError::TooLong("category list"));
        }
        self.u8(items.len() as u8);
        for c in items {
            self.str(c, MAX_CATEGORY_NAME_LEN, "category name")?;
        }
        Ok(())
    }
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    /// Checks the message head and returns the kind.
    fn head(bytes: &'a [u8]) -> Result<(Self, u16), ControlError> {
        let mut d = Decoder(bytes);
        if d.u32()? != MAGIC {
            return Err(ControlError::BadMagic);
        }
        let version = d.u16()?;
        if version != VERSION {
            return Err(ControlError::UnsupportedVersion(version));
        }
        let kind = d.u16()?;
        Ok((d, kind))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.0.len() < n {
            return Err(ControlError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, ControlError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ControlError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, ControlError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn str(&mut self, max: usize, what: &'static str) -> Result<String, ControlError> {
        let n = usize::from(self.u8()?);
        if n > max {
            return Err(ControlError::TooLong(what));
        }
        let b = self.take(n)?;
        core::str::from_utf8(b)
            .map(String::from)
            .map_err(|_| ControlError::NotUtf8)
    }
    fn list(&mut self) -> Result<Vec<String>, ControlError> {
        let n = usize::from(self.u8()?);
        if n > MAX_CATEGORIES {
            return Err(ControlError::TooLong("category list"));
        }
        // Each name takes its length byte at least.
        if n > self.0.len() {
            return Err(ControlError::Truncated);
        }
        (0..n)
            .map(|_| self.str(MAX_CATEGORY_NAME_LEN, "category name"))
            .collect()
    }
    fn end(self) -> Result<(), ControlError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ControlError::TrailingBytes)
        }
    }
}

impl ProviderMessage {
    /// The message's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        match self {
            ProviderMessage::Register {
                name,
                clock,
                categories,
            } => {
                if name.is_empty() {
                    return Err(ControlError::BadValue("provider name"));
                }
                let mut e = Encoder::new(kind::REGISTER);
                e.str(name, MAX_PROVIDER_NAME_LEN, "provider name")?;
                e.u8(clock.value());
                e.list(categories)?;
                Ok(e.0)
            }
        }
    }

    /// The message in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<ProviderMessage, ControlError> {
        let (mut d, k) = Decoder::head(bytes)?;
        let m = match k {
            kind::REGISTER => {
                let name = d.str(MAX_PROVIDER_NAME_LEN, "provider name")?;
                if name.is_empty() {
                    return Err(ControlError::BadValue("provider name"));
                }
                let clock =
                    ClockKind::from_value(d.u8()?).ok_or(ControlError::BadValue("clock"))?;
                let categories = d.list()?;
                ProviderMessage::Register {
                    name,
                    clock,
                    categories,
                }
            }
            other => return Err(ControlError::UnknownKind(other)),
        };
        d.end()?;
        Ok(m)
    }
}

impl ManagerMessage {
    /// The message's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        Ok(match self {
            ManagerMessage::Registered {
                provider_id,
                tracing_started,
            } => {
                let mut e = Encoder::new(kind::REGISTERED);
                e.u32(*provider_id);
                e.u8(u8::from(*tracing_started));
                e.0
            }
            ManagerMessage::Initialize { mode, categories } => {
                let mut e = Encoder::new(kind::INITIALIZE);
                e.u8(mode.header_value());
                e.list(categories)?;
                e.0
            }
            ManagerMessage::Start {
                disposition,
                additional_categories,
            } => {
                let mut e = Encoder::new(kind::START);
                e.u8(disposition.value());
                e.list(additional_categories)?;
                e.0
            }
            ManagerMessage::Stop => Encoder::new(kind::STOP).0,
            ManagerMessage::Terminate => Encoder::new(kind::TERMINATE).0,
        })
    }

    /// The message in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<ManagerMessage, ControlError> {
        let (mut d, k) = Decoder::head(bytes)?;
        let m = match k {
            kind::REGISTERED => {
                let provider_id = d.u32()?;
                let started = match d.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(ControlError::BadValue("tracing_started")),
                };
                ManagerMessage::Registered {
                    provider_id,
                    tracing_started: started,
                }
            }
            kind::INITIALIZE => {
                let mode = BufferingMode::from_header_value(d.u8()?)
                    .ok_or(ControlError::BadValue("buffering mode"))?;
                ManagerMessage::Initialize {
                    mode,
                    categories: d.list()?,
                }
            }
            kind::START => {
                let disposition = BufferDisposition::from_value(d.u8()?)
                    .ok_or(ControlError::BadValue("buffer disposition"))?;
                ManagerMessage::Start {
                    disposition,
                    additional_categories: d.list()?,
                }
            }
            kind::STOP => ManagerMessage::Stop,
            kind::TERMINATE => ManagerMessage::Terminate,
            other => return Err(ControlError::UnknownKind(other)),
        };
        d.end()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn messages_round_trip() {
        let p = ProviderMessage::Register {
            name: "app".to_string(),
            clock: ClockKind::Tsc,
            categories: vec!["net".to_string(), "db".to_string()],
        };
        assert_eq!(ProviderMessage::decode(&p.encode().unwrap()), Ok(p));
        for m in [
            ManagerMessage::Registered {
                provider_id: 9,
                tracing_started: true,
            },
            ManagerMessage::Initialize {
                mode: BufferingMode::Streaming,
                categories: vec!["a".to_string()],
            },
            ManagerMessage::Start {
                disposition: BufferDisposition::ClearNondurable,
                additional_categories: vec![],
            },
            ManagerMessage::Stop,
            ManagerMessage::Terminate,
        ] {
            assert_eq!(ManagerMessage::decode(&m.encode().unwrap()), Ok(m));
        }
    }

    #[test]
    fn bad_messages_are_errors() {
        let stop = ManagerMessage::Stop.encode().unwrap();
        for cut in 0..stop.len() {
            assert!(ManagerMessage::decode(&stop[..cut]).is_err());
        }
        let mut long = stop.clone();
        long.push(0);
        assert_eq!(
            ManagerMessage::decode(&long),
            Err(ControlError::TrailingBytes)
        );
        let mut v2 = stop.clone();
        v2[4] = 2;
        assert_eq!(
            ManagerMessage::decode(&v2),
            Err(ControlError::UnsupportedVersion(2))
        );
        let too_long = ProviderMessage::Register {
            name: "x".repeat(101),
            clock: ClockKind::Boottime,
            categories: vec![],
        };
        assert!(too_long.encode().is_err());
        assert!(ProviderMessage::decode(&stop).is_err());
    }
}
