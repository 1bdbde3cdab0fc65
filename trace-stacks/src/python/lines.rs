//! Line numbers from a code object's location table (`co_linetable`, CPython 3.11 on; the
//! format is CPython's `Objects/locations.md`).
//!
//! The table is a run of entries, each covering 1 to 8 code units: a first byte with its top bit
//! set, a 4-bit code and the number of units less one, then the code's fields. Codes 0–9 (short
//! form) and 10–12 (one-line forms, line delta `code - 10`) keep the line or move it by a small
//! step; 13 gives a signed line delta alone; 14 (long form) a signed line delta and end line and
//! columns; 15 means the units have no location.

/// The line of code unit `unit` in a code object whose first line is `first_line` and location
/// table is `table`; `None` when the table gives it none (or is cut short before it).
pub fn line_of(table: &[u8], first_line: i64, unit: u64) -> Option<i64> {
    let mut bytes = table.iter().copied();
    let mut line = first_line;
    let mut at = 0u64;
    while let Some(first) = bytes.next() {
        if first & 0x80 == 0 {
            // Not an entry's first byte: the table is damaged.
            return None;
        }
        let code = (first >> 3) & 15;
        let units = u64::from(first & 7) + 1;
        let delta = match code {
            15 => None,
            14 => {
                let delta = signed_varint(&mut bytes)?;
                varint(&mut bytes)?;
                varint(&mut bytes)?;
                varint(&mut bytes)?;
                Some(delta)
            }
            13 => Some(signed_varint(&mut bytes)?),
            10..=12 => {
                bytes.next()?;
                bytes.next()?;
                Some(i64::from(code) - 10)
            }
            _ => {
                bytes.next()?;
                Some(0)
            }
        };
        if let Some(delta) = delta {
            line += delta;
        }
        if unit < at + units {
            return delta.map(|_| line);
        }
        at += units;
    }
    None
}

/// An unsigned varint of the table: 6 bits a byte, low first, `0x40` set on all but the last.
fn varint(bytes: &mut impl Iterator<Item = u8>) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes.next()?;
        if shift < 64 {
            value |= u64::from(b & 63) << shift;
        }
        shift += 6;
        if b & 64 == 0 {
            return Some(value);
        }
    }
}

/// A signed varint: the sign in the lowest bit.
fn signed_varint(bytes: &mut impl Iterator<Item = u8>) -> Option<i64> {
    let v = varint(bytes)?;
    let magnitude = (v >> 1) as i64;
    Some(if v & 1 != 0 { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry's first byte: code and unit count.
    fn head(code: u8, units: u8) -> u8 {
        0x80 | (code << 3) | (units - 1)
    }

    #[test]
    fn follows_every_form() {
        let table = [
            // units 0..2: no column info, +1 (line 11)
            head(13, 2),
            2,
            // units 2..5: one-line form, +2 (line 13)
            head(12, 3),
            4,
            9,
            // units 5..6: short form (line 13)
            head(3, 1),
            0x20,
            // units 6..10: long form, -3 (line 10), end line, columns
            head(14, 4),
            7,
            0,
            1,
            5,
            // units 10..11: no location
            head(15, 1),
            // units 11..12: no column info, +65 (line 75): a two-byte varint
            head(13, 1),
            0x40 | 2,
            2,
        ];
        let lines: Vec<_> = (0..13).map(|u| line_of(&table, 10, u)).collect();
        assert_eq!(
            lines,
            [
                Some(11),
                Some(11),
                Some(13),
                Some(13),
                Some(13),
                Some(13),
                Some(10),
                Some(10),
                Some(10),
                Some(10),
                None,
                Some(75),
                None
            ]
        );
    }

    #[test]
    fn damaged_tables_give_no_line() {
        assert_eq!(line_of(&[0x01, 0x02], 1, 0), None);
        assert_eq!(line_of(&[head(14, 1), 0x40], 1, 0), None);
        assert_eq!(line_of(&[], 1, 0), None);
    }
}
