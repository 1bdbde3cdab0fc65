//! The writer of a record's words into space reserved in the buffer.

/// Writes consecutive words from a pointer into reserved buffer space.
pub struct Words {
    pub(super) p: *mut u64,
}

impl Words {
    /// Appends one word.
    #[inline(always)]
    pub fn push(&mut self, w: u64) {
        // SAFETY: the engine reserved room for every word the record's size
        // counts before handing out this writer.
        unsafe {
            self.p.write(w);
            self.p = self.p.add(1);
        }
    }

    /// Appends bytes, zero-padded to whole words.
    #[inline]
    pub fn push_bytes(&mut self, b: &[u8]) {
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.push(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.push(u64::from_le_bytes(w));
        }
    }
}
