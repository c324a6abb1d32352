//! The request framer, open to the fuzz target (`fuzz/fuzz_targets/framing.rs`)
//! and nothing else: built only with the `fuzzing` feature.

use crate::framing::{Framer, Limits, Step};

/// What the framer made of some bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes released to hyper, in order, as one run.
    pub released: usize,
    /// How many of the releases ended a request head.
    pub heads: usize,
    /// The status and reason of a refusal, if there was one.
    pub refused: Option<(u16, &'static str)>,
}

/// Feeds `parts` one after another to a fresh framer, as a connection would
/// deliver them (unreleased bytes stay buffered ahead of the next part),
/// and releases whatever it allows. Small limits, so that the fuzzer
/// reaches them.
pub fn feed(parts: &[&[u8]]) -> Outcome {
    let mut framer = Framer::new(Limits {
        request_line: 64,
        header_size: 256,
        headers: 8,
    });
    let mut held: Vec<u8> = Vec::new();
    let mut out = Outcome {
        released: 0,
        heads: 0,
        refused: None,
    };
    for part in parts {
        held.extend_from_slice(part);
        loop {
            match framer.step(&held) {
                Ok(Step::Release { len, head }) => {
                    assert!(len > 0, "a release of nothing would loop forever");
                    assert!(len <= held.len(), "released bytes it was never given");
                    held.drain(..len);
                    out.released += len;
                    out.heads += usize::from(head.is_some());
                }
                Ok(Step::Incomplete) => break,
                Err(refusal) => {
                    out.refused = Some((refusal.status.as_u16(), refusal.why));
                    return out;
                }
            }
        }
    }
    out
}
