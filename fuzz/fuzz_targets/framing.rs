//! Feeds arbitrary bytes to the request framer, the guard that decides
//! where each request on a connection begins and ends before hyper sees it.
//! It may refuse but must never panic, never release bytes it was not
//! given, and must reach the same decision however the bytes are cut into
//! reads (the same bytes released, the same request heads, a refusal or
//! none): a framer whose answer depends on packet boundaries is a request
//! smuggling bug. Only the reason for a refusal may differ: a line that is
//! both too long and badly ended is refused for whichever is seen first.
//!
//!     cargo +nightly fuzz run framing -- -dict=fuzz/framing.dict

#![no_main]

use hearth_http::fuzzing::feed;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let decision = |o: &hearth_http::fuzzing::Outcome| (o.released, o.heads, o.refused.is_some());
    let whole = feed(&[rest]);
    assert!(whole.released <= rest.len());

    let cut = usize::from(split) % (rest.len() + 1);
    let halves = feed(&[&rest[..cut], &rest[cut..]]);
    assert_eq!(decision(&whole), decision(&halves), "cut at {cut}");

    let bytes: Vec<&[u8]> = rest.chunks(1).collect();
    let trickled = feed(&bytes);
    assert_eq!(decision(&whole), decision(&trickled), "one byte at a time");
});
