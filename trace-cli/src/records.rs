//! The records of a trace file, decoded one by one from a stream, for the
//! commands that take every record that decodes and count the rest.

use std::io::Read;

use trace_common::fxt::Record;
use trace_common::fxt::read::decode;
use trace_common::fxt::stream::{RecordStream, StreamErrorKind};

/// Hands every record of the FXT stream `input` that decodes to `each`,
/// with its offset and bytes; a damaged place, or a record that does not
/// decode, is counted in `malformed` and passed over. Fails when `input`
/// cannot be read, or with what `each` fails with.
pub fn each_record(
    input: impl Read,
    malformed: &mut u64,
    mut each: impl FnMut(u64, &[u8], Record<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut records = RecordStream::new(input);
    while let Some(next) = records.next_record() {
        let (offset, raw) = match next {
            Ok(found) => found,
            Err(e) if matches!(e.kind, StreamErrorKind::Read(_)) => {
                return Err(std::io::Error::other(e));
            }
            Err(_) => {
                *malformed += 1;
                continue;
            }
        };
        match decode(raw) {
            Ok((record, _)) => each(offset, raw, record)?,
            Err(_) => *malformed += 1,
        }
    }
    Ok(())
}
