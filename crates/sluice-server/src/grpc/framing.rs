//! Where a gRPC request body is in its messages: each is a 5-byte prefix (a compressed
//! flag, then the length as a big-endian `u32`) followed by that many bytes. Read chunk by
//! chunk, as HTTP/2 DATA frames bring them, without keeping any of their bytes.

/// The length of a message's prefix.
const PREFIX: usize = 5;

/// How far the messages of one body have come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Framing {
    /// The prefix of the message in progress, as far as it came.
    prefix: [u8; PREFIX],
    /// Bytes of `prefix` read; [`PREFIX`] once it came in full.
    prefix_read: usize,
    /// Bytes of the message in progress still to come, after its prefix.
    left: usize,
    /// The largest length a prefix declared.
    pub(crate) longest_declared: usize,
}

impl Framing {
    /// Whether a message has begun and not come in full.
    pub(crate) fn mid_message(&self) -> bool {
        self.prefix_read > 0
    }

    /// Reads `chunk`; how many of its first bytes end on a message boundary (every message
    /// in them came in full; `0` when none ended in `chunk`).
    pub(crate) fn read(&mut self, chunk: &[u8]) -> usize {
        let (mut at, mut boundary) = (0, 0);
        while at < chunk.len() {
            if self.prefix_read < PREFIX {
                let taken = (PREFIX - self.prefix_read).min(chunk.len() - at);
                self.prefix[self.prefix_read..self.prefix_read + taken].copy_from_slice(&chunk[at..at + taken]);
                (at, self.prefix_read) = (at + taken, self.prefix_read + taken);
                if self.prefix_read < PREFIX {
                    break;
                }
                let [_, length @ ..] = self.prefix;
                self.left = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
                self.longest_declared = self.longest_declared.max(self.left);
            } else {
                let taken = self.left.min(chunk.len() - at);
                (at, self.left) = (at + taken, self.left - taken);
            }
            if self.prefix_read == PREFIX && self.left == 0 {
                (self.prefix_read, boundary) = (0, at);
            }
        }
        boundary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &[u8]) -> Vec<u8> {
        let mut framed = vec![0];
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(body);
        framed
    }

    #[test]
    fn a_message_in_one_chunk_ends_on_its_boundary() {
        let mut framing = Framing::default();
        let framed = message(b"hello");
        assert_eq!(framing.read(&framed), framed.len());
        assert!(!framing.mid_message());
    }

    #[test]
    fn a_message_split_anywhere_ends_in_the_chunk_that_completes_it() {
        let framed = [message(b"first"), message(b""), message(b"third!")].concat();
        for split in 0..=framed.len() {
            for second_split in split..=framed.len() {
                let mut framing = Framing::default();
                let chunks = [&framed[..split], &framed[split..second_split], &framed[second_split..]];
                let mut ends = Vec::new();
                let mut offset = 0;
                for chunk in chunks {
                    let boundary = framing.read(chunk);
                    if boundary > 0 {
                        ends.push(offset + boundary);
                    }
                    offset += chunk.len();
                }
                assert_eq!(ends.last(), Some(&framed.len()), "splits at {split}, {second_split}");
                assert!(ends.iter().all(|end| [10, 15, 26].contains(end)), "{ends:?}");
                assert!(!framing.mid_message());
            }
        }
    }

    #[test]
    fn a_lone_prefix_is_a_message_begun_with_its_declared_length() {
        let mut framing = Framing::default();
        assert_eq!(framing.read(&[0, 0, 1, 0, 0]), 0);
        assert!(framing.mid_message());
        assert_eq!(framing.longest_declared, 65_536);
        let mut framing = Framing::default();
        assert_eq!(framing.read(&[0, 0]), 0);
        assert!(framing.mid_message(), "a partial prefix is a message begun too");
    }
}
