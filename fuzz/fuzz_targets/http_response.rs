//! The green client's HTTP/1.1 response parser (`workload/http/wire.rs`: the head with
//! httparse, bodies by length, chunks or close): no panic, nothing consumed past the input,
//! and the same answer however the bytes arrive (in one read, or in small pieces through a
//! small buffer).
#![no_main]
use concur::fuzzing::read_response;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte: the piece size (1 to 64) and whether the request was a HEAD.
    let Some((&first, bytes)) = data.split_first() else {
        return;
    };
    let (piece, to_head) = (usize::from(first & 63) + 1, first & 64 != 0);
    let whole = read_response(bytes, bytes.len().max(1), bytes.len().max(1), to_head);
    let split = read_response(bytes, piece, 16, to_head);
    if let Ok((_, consumed)) = &whole {
        assert!(*consumed <= bytes.len());
    }
    // A head over 64 KiB is only refused when it spans reads; inputs stay below that.
    if bytes.len() < 60 << 10 {
        match (&whole, &split) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{bytes:?}"),
            (Err(_), Err(_)) => {}
            _ => panic!("in one read: {whole:?}; in pieces of {piece}: {split:?}"),
        }
    }
});
