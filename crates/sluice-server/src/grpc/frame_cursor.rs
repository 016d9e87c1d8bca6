//! Where the HTTP/2 frames a client sends begin, followed across reads of any size.
//!
//! A young connection's task runs on the intake runtime ([`crate::runtime::intake`]) until
//! its second stream. hyper reads and parses every frame in the bytes it is given before it
//! starts a stream's task, so a client that sends a hundred streams at once would have them
//! all parsed, and their state allocated, there. The socket therefore reads a young
//! connection's bytes no further than the next frame's end, follows where the frames begin
//! with a [`FrameCursor`], and settles the connection at the header of its second HEADERS
//! frame: that frame, and what follows, is read on the worker.

/// The client's connection preface, which comes before its first frame (RFC 9113, 3.4).
const PREFACE: usize = 24;
/// A frame's header: a 24-bit payload length, a type, flags and a stream id (RFC 9113, 4.1).
const FRAME_HEADER: usize = 9;
/// The type of a HEADERS frame, which opens a stream (or ends one with trailers).
const HEADERS: u8 = 0x1;

/// Where a connection's next bytes fall: in the preface, a frame's header, or its payload.
#[derive(Debug)]
pub(crate) struct FrameCursor {
    part: Part,
    /// Bytes left in `part`.
    left: usize,
    /// The frame header being read, `FRAME_HEADER - left` bytes of it so far.
    header: [u8; FRAME_HEADER],
    /// HEADERS frames whose header has been read.
    headers_frames: u32,
}

/// A part of the byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Preface,
    FrameHeader,
    Payload,
}

impl FrameCursor {
    /// A cursor at a connection's first byte.
    pub(crate) fn new() -> FrameCursor {
        FrameCursor { part: Part::Preface, left: PREFACE, header: [0; FRAME_HEADER], headers_frames: 0 }
    }

    /// How many bytes may be read next without passing the end of the current part, so
    /// that a frame's header is known before any of its payload is read.
    pub(crate) fn next_read(&self) -> usize {
        self.left
    }

    /// Follows the bytes `read`, at most [`FrameCursor::next_read`] of them; returns how
    /// many HEADERS frames have begun so far (their header fully read).
    pub(crate) fn advance(&mut self, read: &[u8]) -> u32 {
        debug_assert!(read.len() <= self.left, "a read passed the end of its part");
        let read = &read[..read.len().min(self.left)];
        if self.part == Part::FrameHeader {
            let at = FRAME_HEADER - self.left;
            self.header[at..at + read.len()].copy_from_slice(read);
        }
        self.left -= read.len();
        if self.left == 0 {
            self.next_part();
        }
        self.headers_frames
    }

    /// Moves past a finished part: the preface or a payload to a header, a header to its
    /// payload (or to the next header, for an empty payload).
    fn next_part(&mut self) {
        if self.part != Part::FrameHeader {
            (self.part, self.left) = (Part::FrameHeader, FRAME_HEADER);
            return;
        }
        let [high, middle, low, kind, ..] = self.header;
        if kind == HEADERS {
            self.headers_frames += 1;
        }
        let payload = usize::from(high) << 16 | usize::from(middle) << 8 | usize::from(low);
        (self.part, self.left) =
            if payload == 0 { (Part::FrameHeader, FRAME_HEADER) } else { (Part::Payload, payload) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bytes of a connection that sends the preface, then `frames` (type, payload
    /// length); and where each HEADERS frame's header ends.
    fn connection(frames: &[(u8, usize)]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let mut headers_ends = Vec::new();
        for (stream, &(kind, length)) in frames.iter().enumerate() {
            let length_bytes = u32::try_from(length).unwrap().to_be_bytes();
            bytes.extend_from_slice(&length_bytes[1..]);
            bytes.extend_from_slice(&[kind, 0x4]);
            bytes.extend_from_slice(&u32::try_from(2 * stream + 1).unwrap().to_be_bytes());
            if kind == HEADERS {
                headers_ends.push(bytes.len());
            }
            // Payload bytes that look like frame headers of every type.
            bytes.extend((0..length).map(|at| u8::try_from(at % 11).unwrap()));
        }
        (bytes, headers_ends)
    }

    proptest! {
        /// Read in chunks of any size within the cursor's bound, a connection's HEADERS
        /// frames are counted exactly as each one's header ends, never earlier or later.
        #[test]
        fn headers_frames_are_counted_as_their_header_ends_whatever_the_reads(
            frames in proptest::collection::vec((0u8..10, 0usize..300), 0..40),
            chunks in proptest::collection::vec(1usize..64, 1..50),
        ) {
            let (bytes, headers_ends) = connection(&frames);
            let mut cursor = FrameCursor::new();
            let (mut at, mut chunk) = (0, 0);
            while at < bytes.len() {
                let next = cursor.next_read().min(chunks[chunk % chunks.len()]).min(bytes.len() - at);
                prop_assert!(next > 0);
                let begun = cursor.advance(&bytes[at..at + next]);
                at += next;
                chunk += 1;
                let expected = headers_ends.iter().filter(|&&end| end <= at).count();
                prop_assert_eq!(usize::try_from(begun).unwrap(), expected, "after {} bytes", at);
            }
        }
    }

    #[test]
    fn a_read_stops_at_the_preface_then_at_each_header_and_payload() {
        let (bytes, _) = connection(&[(0x4, 6), (HEADERS, 0), (HEADERS, 3)]);
        let mut cursor = FrameCursor::new();
        let mut reads = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let next = cursor.next_read();
            reads.push(next);
            cursor.advance(&bytes[at..at + next]);
            at += next;
        }
        assert_eq!(reads, [PREFACE, FRAME_HEADER, 6, FRAME_HEADER, FRAME_HEADER, 3]);
        assert_eq!(cursor.headers_frames, 2);
    }
}
