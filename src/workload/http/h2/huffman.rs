//! HPACK's Huffman code (RFC 7541 §5.2 and Appendix B): decoding the string literals a
//! server sends Huffman-encoded (every header value of hyper's, nghttp2's and nginx's
//! encoders that comes out shorter so). The client sends its own literals raw.
//!
//! The code is canonical: the codes of one length are consecutive and follow the shorter
//! ones, in symbol order (a test checks it against the table). So where each length's codes
//! start and end is all the decoder needs: it reads the next 30 bits (the longest code) and
//! finds the one length whose range holds their prefix, with no tree and no generated state
//! table.

/// RFC 7541 Appendix B: the code and its length in bits of symbols 0 to 255 and of EOS (256).
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// The end-of-string symbol, which never appears in a string (§5.2).
const EOS: u16 = 256;

/// The longest code.
const MAX_LEN: usize = 30;

/// Where each length's codes are: the first code of length `l` is `first[l]`, the codes of
/// that length end before `limit[l]`, and their symbols, in code order, start at `offset[l]`
/// in `symbols`.
struct Lengths {
    first: [u32; MAX_LEN + 1],
    limit: [u32; MAX_LEN + 1],
    offset: [u16; MAX_LEN + 1],
    symbols: [u16; 257],
}

/// [`Lengths`] from [`CODES`]' lengths alone, by the canonical construction (RFC 1951 §3.2.2):
/// a code is the previous one plus one, shifted left at each longer length.
const fn lengths() -> Lengths {
    let mut count = [0u32; MAX_LEN + 1];
    let mut s = 0;
    while s < CODES.len() {
        count[CODES[s].1 as usize] += 1;
        s += 1;
    }
    let mut t = Lengths {
        first: [0; MAX_LEN + 1],
        limit: [0; MAX_LEN + 1],
        offset: [0; MAX_LEN + 1],
        symbols: [0; 257],
    };
    let (mut code, mut at) = (0u32, 0u16);
    let mut l = 1;
    while l <= MAX_LEN {
        t.first[l] = code;
        t.offset[l] = at;
        code += count[l];
        t.limit[l] = code;
        code <<= 1;
        // The symbols of this length, in symbol order: in code order too.
        let mut s = 0;
        while s < CODES.len() {
            if CODES[s].1 as usize == l {
                t.symbols[at as usize] = s as u16;
                at += 1;
            }
            s += 1;
        }
        l += 1;
    }
    t
}

static TABLE: Lengths = lengths();

/// Appends the decoding of `src` to `out`. Refused: a code for EOS, and padding that is 8 bits
/// or longer or not the most significant bits of EOS (all ones), as §5.2 requires.
pub(super) fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
    let t = &TABLE;
    // The unread bits are the low `bits` bits of `acc`.
    let (mut acc, mut bits, mut at) = (0u64, 0u32, 0usize);
    out.reserve(src.len() + src.len() / 2);
    loop {
        while bits <= 56 && at < src.len() {
            acc = (acc << 8) | u64::from(src[at]);
            bits += 8;
            at += 1;
        }
        if bits == 0 {
            return Ok(());
        }
        // The next 30 bits; past the end, ones (what padding is made of), which complete no
        // code shorter than EOS's 30.
        let window = if bits >= 30 {
            (acc >> (bits - 30)) as u32
        } else {
            ((acc << (30 - bits)) as u32) | ((1u32 << (30 - bits)) - 1)
        } & 0x3fff_ffff;
        let mut len = 5;
        while window >> (30 - len) >= t.limit[len] {
            len += 1;
        }
        if len as u32 > bits {
            if bits > 7 {
                return Err("Huffman padding of 8 bits or more");
            }
            let ones = (1u64 << bits) - 1;
            if acc & ones != ones {
                return Err("Huffman padding that is not EOS's first bits");
            }
            return Ok(());
        }
        let code = window >> (30 - len);
        let symbol = t.symbols[(u32::from(t.offset[len]) + code - t.first[len]) as usize];
        if symbol == EOS {
            return Err("EOS inside a Huffman string");
        }
        out.push(symbol as u8);
        bits -= len as u32;
        acc &= (1u64 << bits) - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `bytes` Huffman-encoded with [`CODES`], padded with ones (what a server's
    /// encoder does).
    pub(crate) fn encode(bytes: &[u8]) -> Vec<u8> {
        let (mut acc, mut bits, mut out) = (0u64, 0u32, Vec::new());
        for &b in bytes {
            let (code, len) = CODES[b as usize];
            acc = (acc << len) | u64::from(code);
            bits += u32::from(len);
            while bits >= 8 {
                out.push((acc >> (bits - 8)) as u8);
                bits -= 8;
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) as u8) | ((1u8 << (8 - bits)) - 1));
        }
        out
    }

    #[test]
    fn the_table_is_canonical_so_its_lengths_alone_decode_it() {
        let t = lengths();
        for (s, &(code, len)) in CODES.iter().enumerate() {
            let l = len as usize;
            let at = t.symbols[t.offset[l] as usize..]
                .iter()
                .position(|&x| x == s as u16)
                .unwrap();
            assert_eq!(t.first[l] + at as u32, code, "symbol {s}");
            assert!(code < t.limit[l], "symbol {s}");
        }
        assert_eq!(t.limit[MAX_LEN], 1 << 30, "the code space is full");
        assert_eq!(CODES[256], (0x3fff_ffff, 30));
    }

    #[test]
    fn rfc_7541_appendix_c4_strings_decode() {
        let hex = |s: &str| -> Vec<u8> {
            let s: String = s.split_whitespace().collect();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        for (encoded, text) in [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
                "https://www.example.com",
            ),
            (
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ] {
            let mut out = Vec::new();
            decode(&hex(encoded), &mut out).unwrap();
            assert_eq!(out, text.as_bytes(), "{encoded}");
            assert_eq!(encode(text.as_bytes()), hex(encoded), "{text}");
        }
    }

    #[test]
    fn every_byte_decodes_and_bad_padding_and_eos_are_refused() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        decode(&encode(&all), &mut out).unwrap();
        assert_eq!(out, all);
        for text in [&b""[..], b"a", b"ab", b"\xff\x00", b"0123456789"] {
            let mut out = Vec::new();
            decode(&encode(text), &mut out).unwrap();
            assert_eq!(out, text);
        }
        let refused = |bytes: &[u8]| decode(bytes, &mut Vec::new()).unwrap_err();
        // 'a' is 00011 (5 bits): three bits of padding must be ones.
        assert_eq!(decode(&[0b0001_1111], &mut Vec::new()), Ok(()));
        assert_eq!(
            refused(&[0b0001_1011]),
            "Huffman padding that is not EOS's first bits"
        );
        // A whole byte of ones after a symbol: padding of 8 bits.
        assert_eq!(
            refused(&[0b0001_1111, 0xff]),
            "Huffman padding of 8 bits or more"
        );
        assert_eq!(refused(&[0xff; 4]), "EOS inside a Huffman string");
    }
}
