//! HPACK (RFC 7541): the whole decoder for the server's response heads (static and dynamic
//! tables, table size updates, Huffman strings), and the client's own encoder, made for
//! requests that differ only in their path.
//!
//! The encoder does not search a table per header. A cell's requests share every field but
//! `:path` ([`Template`]), so the first request on a connection adds those fields to the
//! server's dynamic table, and every later one names them by index, one byte each; the path
//! goes as a literal that is never added (each one is new). A template's three encodings (the
//! one that adds, the one that names, and one without the dynamic table for a server whose
//! table is too small) are made once, so a request's head is a copy of a few bytes and its
//! path. A request whose other fields vary too ([`Fields`]) is sent as literals, with static
//! names, and leaves the dynamic table alone.
//!
//! The decoder is bounded: its table holds at most what the client's SETTINGS allow (the
//! default 4,096 bytes), an integer past 2^32 or a string past its block is refused, and the
//! decoded list's size is counted by the caller, which caps it.

use std::collections::VecDeque;

use super::huffman;

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The bytes an entry costs beyond its name and value (RFC 7541 §4.1).
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// The dynamic table size every HTTP/2 connection starts with (RFC 9113 §6.5.2).
pub(super) const DEFAULT_TABLE_SIZE: u32 = 4_096;

/// Why a header block cannot be decoded: the connection's HPACK state is lost with it, so the
/// connection ends (COMPRESSION_ERROR).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DecodeError(pub(super) &'static str);

/// A dynamic table entry: name and value in one allocation.
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The response side: the server's encoder's dynamic table, mirrored.
pub(super) struct Decoder {
    /// Newest first (index 62 is `table[0]`).
    table: VecDeque<Entry>,
    /// The entries' size (RFC 7541 §4.1).
    size: usize,
    /// The table's maximum size, as the server's last size update set it.
    max: usize,
    /// The most the server may set: the client's `SETTINGS_HEADER_TABLE_SIZE`.
    limit: usize,
    /// Scratch for a literal name and value (Huffman-decoded or copied).
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder whose table may hold `limit` bytes (the client's setting).
    pub(super) fn new(limit: u32) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: limit as usize,
            limit: limit as usize,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Decodes one whole header block, handing every field to `field` in order, and keeps the
    /// table as the server's encoder keeps its own.
    pub(super) fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let mut at = 0;
        let mut fields_seen = false;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = integer(block, &mut at, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value);
                fields_seen = true;
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the block's first field.
                if fields_seen {
                    return Err(DecodeError("a table size update after a field"));
                }
                let size = integer(block, &mut at, 5)? as usize;
                if size > self.limit {
                    return Err(DecodeError(
                        "a table size update above the client's SETTINGS_HEADER_TABLE_SIZE",
                    ));
                }
                self.max = size;
                self.evict(0);
            } else {
                // A literal (§6.2): with incremental indexing (01), without (0000) or never
                // indexed (0001).
                let (prefix, add) = if b & 0xc0 == 0x40 {
                    (6, true)
                } else {
                    (4, false)
                };
                let index = integer(block, &mut at, prefix)?;
                let mut name = std::mem::take(&mut self.name);
                let mut value = std::mem::take(&mut self.value);
                name.clear();
                value.clear();
                let read = (|| {
                    if index == 0 {
                        string(block, &mut at, &mut name)?;
                    } else {
                        name.extend_from_slice(self.entry(index)?.0);
                    }
                    string(block, &mut at, &mut value)
                })();
                if read.is_ok() {
                    field(&name, &value);
                    if add {
                        self.insert(&name, &value);
                    }
                }
                self.name = name;
                self.value = value;
                read?;
                fields_seen = true;
            }
        }
        Ok(())
    }

    /// The entry at `index` of the static table followed by the dynamic one.
    fn entry(&self, index: u32) -> Result<(&[u8], &[u8]), DecodeError> {
        let i = index as usize;
        match i {
            0 => Err(DecodeError("index 0")),
            1..=61 => {
                let (n, v) = STATIC[i - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(i - 62)
                .map(|e| (e.name(), e.value()))
                .ok_or(DecodeError("an index past the dynamic table")),
        }
    }

    /// Adds an entry at the front, evicting from the back what it needs; an entry larger than
    /// the whole table empties it and is not added (§4.4).
    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.table.push_front(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some(e) => self.size -= e.size(),
                None => break,
            }
        }
    }

    /// The table's entries, newest first, and its size: for tests.
    #[cfg(test)]
    pub(super) fn entries(&self) -> (Vec<(String, String)>, usize) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let all = self
            .table
            .iter()
            .map(|e| (text(e.name()), text(e.value())))
            .collect();
        (all, self.size)
    }
}

/// An integer with an `n`-bit prefix at `block[*at]` (§5.1), `*at` moved past it. Refused
/// past `u32::MAX` or the block's end.
fn integer(block: &[u8], at: &mut usize, n: u32) -> Result<u32, DecodeError> {
    let max_prefix = (1u32 << n) - 1;
    let first = u32::from(block[*at]) & max_prefix;
    *at += 1;
    if first < max_prefix {
        return Ok(first);
    }
    let mut value = u64::from(max_prefix);
    let mut shift = 0;
    loop {
        let Some(&b) = block.get(*at) else {
            return Err(DecodeError("an integer cut off by the block's end"));
        };
        *at += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(DecodeError("an integer over 2^32"));
        }
        if b & 0x80 == 0 {
            return Ok(value as u32);
        }
        shift += 7;
        // Five bytes after the prefix hold any u32 (4 × 7 bits, then the top ones); more
        // are zero padding at best, refused before the shift could overflow.
        if shift > 28 {
            return Err(DecodeError("an integer over 2^32"));
        }
    }
}

/// A string literal at `block[*at]` (§5.2), appended to `out`: Huffman-decoded if marked so.
fn string(block: &[u8], at: &mut usize, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let Some(&first) = block.get(*at) else {
        return Err(DecodeError("a string literal missing at the block's end"));
    };
    let huffman = first & 0x80 != 0;
    let len = integer(block, at, 7)? as usize;
    let Some(bytes) = block.get(*at..*at + len) else {
        return Err(DecodeError(
            "a string literal longer than the rest of its block",
        ));
    };
    *at += len;
    if huffman {
        huffman::decode(bytes, out).map_err(DecodeError)
    } else {
        out.extend_from_slice(bytes);
        Ok(())
    }
}

/// Appends `value` as an integer with an `n`-bit prefix, the prefix's other bits `flags`.
fn put_integer(out: &mut Vec<u8>, flags: u8, n: u32, value: usize) {
    let max_prefix = (1usize << n) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a raw (not Huffman-encoded) string literal.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// The static table's index of `name` with `value`, and of `name` alone.
fn static_index(name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
    let mut by_name = None;
    for (i, (n, v)) in STATIC.iter().enumerate() {
        if n.as_bytes() == name {
            if v.as_bytes() == value {
                return (Some(i + 1), Some(i + 1));
            }
            by_name = by_name.or(Some(i + 1));
        }
    }
    (None, by_name)
}

/// Appends a literal field that is not added to the table (§6.2.2), its name by static index
/// where there is one.
fn put_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match static_index(name, value) {
        (Some(i), _) => put_integer(out, 0x80, 7, i),
        (None, Some(i)) => {
            put_integer(out, 0x00, 4, i);
            put_string(out, value);
        }
        (None, None) => {
            out.push(0x00);
            put_string(out, name);
            put_string(out, value);
        }
    }
}

/// The fields every request of a cell sends, encoded three ways once.
#[derive(Debug)]
pub(crate) struct Template {
    /// Adds each field that the static table does not hold whole to the dynamic table.
    adding: Vec<u8>,
    /// Names each field by index, once `adding` went out on the connection.
    indexed: Vec<u8>,
    /// Without the dynamic table.
    plain: Vec<u8>,
    /// What the added entries take of the server's table.
    table_size: usize,
    /// Whether each request sends its own `:path`.
    path_varies: bool,
}

impl Template {
    /// The template of requests whose fields are `fields` (names lowercase, the
    /// pseudo-headers first), plus a `:path` of their own when `path_varies` (else `fields`
    /// holds it).
    pub(crate) fn new(fields: &[(String, String)], path_varies: bool) -> Template {
        let (mut adding, mut indexed, mut plain) = (Vec::new(), Vec::new(), Vec::new());
        // Entries added: (field position, bytes); indices are known once all are counted.
        let mut added = Vec::new();
        let mut table_size = 0;
        for (name, value) in fields {
            let (name, value) = (name.as_bytes(), value.as_bytes());
            put_literal(&mut plain, name, value);
            match static_index(name, value) {
                (Some(i), _) => {
                    put_integer(&mut adding, 0x80, 7, i);
                    added.push(None);
                }
                (None, by_name) => {
                    match by_name {
                        Some(i) => put_integer(&mut adding, 0x40, 6, i),
                        None => {
                            adding.push(0x40);
                            put_string(&mut adding, name);
                        }
                    }
                    put_string(&mut adding, value);
                    table_size += name.len() + value.len() + ENTRY_OVERHEAD;
                    added.push(Some(()));
                }
            }
        }
        // The k-th entry added (of K) ends at index 62 + K - 1 - k: the newest is 62.
        let total = added.iter().flatten().count();
        let mut k = 0;
        for ((name, value), entry) in fields.iter().zip(&added) {
            match entry {
                Some(()) => {
                    put_integer(&mut indexed, 0x80, 7, 62 + total - 1 - k);
                    k += 1;
                }
                None => put_literal(&mut indexed, name.as_bytes(), value.as_bytes()),
            }
        }
        Template {
            adding,
            indexed,
            plain,
            table_size,
            path_varies,
        }
    }
}

/// One request's head as the connection encodes it.
#[derive(Clone, Copy)]
pub(crate) enum Head<'a> {
    /// The template's fields and this `:path` (ignored when the template holds the path).
    Path(&'a str),
    /// Every field of its own (names lowercase, pseudo-headers first), the template unused.
    Fields(&'a [(String, String)]),
}

/// The request side: what the server's table holds of the client's template.
pub(super) struct Encoder {
    /// The server's `SETTINGS_HEADER_TABLE_SIZE`.
    peer_max: u32,
    /// Size updates owed at the start of the next block (§4.2): the smallest value the
    /// server's setting took since the last block, and its value now.
    owed: Option<(u32, u32)>,
    /// Whether the template's entries are in the server's table.
    indexed: bool,
}

impl Encoder {
    pub(super) fn new() -> Encoder {
        Encoder {
            peer_max: DEFAULT_TABLE_SIZE,
            owed: None,
            indexed: false,
        }
    }

    /// The server's SETTINGS set its table size to `size`.
    pub(super) fn peer_table_size(&mut self, size: u32) {
        if size == self.peer_max && self.owed.is_none() {
            return;
        }
        let lowest = self.owed.map_or(size, |(low, _)| low.min(size));
        self.owed = Some((lowest.min(self.peer_max), size));
        self.peer_max = size;
    }

    /// Appends `head`'s block.
    pub(super) fn encode(&mut self, template: &Template, head: Head<'_>, out: &mut Vec<u8>) {
        if let Some((lowest, now)) = self.owed.take() {
            put_integer(out, 0x20, 5, lowest as usize);
            if now != lowest {
                put_integer(out, 0x20, 5, now as usize);
            }
            if (lowest as usize) < template.table_size {
                // Some of the template's entries were evicted.
                self.indexed = false;
            }
        }
        match head {
            Head::Fields(fields) => {
                for (name, value) in fields {
                    put_literal(out, name.as_bytes(), value.as_bytes());
                }
            }
            Head::Path(path) => {
                if template.path_varies {
                    // Literal without indexing, name `:path` (static 4).
                    put_integer(out, 0x00, 4, 4);
                    put_string(out, path.as_bytes());
                }
                if self.indexed {
                    out.extend_from_slice(&template.indexed);
                } else if template.table_size <= self.peer_max as usize {
                    out.extend_from_slice(&template.adding);
                    self.indexed = true;
                } else {
                    out.extend_from_slice(&template.plain);
                }
            }
        }
    }
}

/// The HPACK part of the `h2_frames` fuzz target: `block` decoded as one header block, then
/// as two (split in its middle) on the same table. No panic, and the table never holds more
/// than the client's setting allows.
#[cfg(feature = "fuzzing")]
pub(super) fn fuzz_block(block: &[u8]) {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut fields = 0usize;
    let _ = d.decode(block, |_, _| fields += 1);
    assert!(d.size <= d.max && d.max <= DEFAULT_TABLE_SIZE as usize);
    let (a, b) = block.split_at(block.len() / 2);
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    if d.decode(a, |_, _| {}).is_ok() {
        let _ = d.decode(b, |_, _| {});
    }
    let sum: usize = d.table.iter().map(Entry::size).sum();
    assert!(sum == d.size && d.size <= d.max, "{sum} {}", d.size);
}

/// The fields a server decodes from `heads` sent in turn on one connection: for tests of the
/// requests' heads.
#[cfg(test)]
pub(crate) fn fields_sent(template: &Template, heads: &[Head<'_>]) -> Vec<Vec<(String, String)>> {
    let (mut encoder, mut decoder) = (Encoder::new(), Decoder::new(DEFAULT_TABLE_SIZE));
    heads
        .iter()
        .map(|head| {
            let mut block = Vec::new();
            encoder.encode(template, *head, &mut block);
            let mut fields = Vec::new();
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            decoder
                .decode(&block, |n, v| fields.push((text(n), text(v))))
                .expect("the client's own block decodes");
            fields
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decoded(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        d.decode(block, |n, v| {
            fields.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
        fields
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 C.3 (requests without Huffman) and C.4 (the same with Huffman): three blocks
    /// on one connection, the fields and the dynamic table after each.
    #[test]
    fn rfc_7541_c3_and_c4_requests_decode_with_their_tables() {
        let blocks = [
            (
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            ),
            (
                "8286 84be 5808 6e6f 2d63 6163 6865",
                "8286 84be 5886 a8eb 1064 9cbf",
            ),
            (
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ),
        ];
        let want = [
            (
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                ]),
                pairs(&[(":authority", "www.example.com")]),
                57,
            ),
            (
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache"),
                ]),
                pairs(&[
                    ("cache-control", "no-cache"),
                    (":authority", "www.example.com"),
                ]),
                110,
            ),
            (
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value"),
                ]),
                pairs(&[
                    ("custom-key", "custom-value"),
                    ("cache-control", "no-cache"),
                    (":authority", "www.example.com"),
                ]),
                164,
            ),
        ];
        for huffman in [false, true] {
            let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
            for ((raw, huff), (fields, table, size)) in blocks.iter().zip(&want) {
                let block = hex(if huffman { huff } else { raw });
                assert_eq!(&decoded(&mut d, &block), fields, "huffman {huffman}");
                assert_eq!(d.entries(), (table.clone(), *size), "huffman {huffman}");
            }
        }
    }

    /// RFC 7541 C.5 (responses without Huffman) and C.6 (with), in a table of 256 bytes:
    /// entries evicted as new ones come.
    #[test]
    fn rfc_7541_c5_and_c6_responses_decode_with_evictions() {
        let blocks = [
            (
                "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            ),
            (
                "4803 3330 37c1 c0bf",
                "4883 640e ffc1 c0bf",
            ),
            (
                "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
                "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ),
        ];
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
        let location = "https://www.example.com";
        let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let want = [
            (
                pairs(&[
                    (":status", "302"),
                    ("cache-control", "private"),
                    ("date", date1),
                    ("location", location),
                ]),
                pairs(&[
                    ("location", location),
                    ("date", date1),
                    ("cache-control", "private"),
                    (":status", "302"),
                ]),
                222,
            ),
            (
                pairs(&[
                    (":status", "307"),
                    ("cache-control", "private"),
                    ("date", date1),
                    ("location", location),
                ]),
                pairs(&[
                    (":status", "307"),
                    ("location", location),
                    ("date", date1),
                    ("cache-control", "private"),
                ]),
                222,
            ),
            (
                pairs(&[
                    (":status", "200"),
                    ("cache-control", "private"),
                    ("date", date2),
                    ("location", location),
                    ("content-encoding", "gzip"),
                    ("set-cookie", cookie),
                ]),
                pairs(&[
                    ("set-cookie", cookie),
                    ("content-encoding", "gzip"),
                    ("date", date2),
                ]),
                215,
            ),
        ];
        for huffman in [false, true] {
            let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
            // The examples' encoder works in 256 bytes: a size update says so.
            decoded(&mut d, &hex("3fe1 01"));
            assert_eq!(d.max, 256);
            for ((raw, huff), (fields, table, size)) in blocks.iter().zip(&want) {
                let block = hex(if huffman { huff } else { raw });
                assert_eq!(&decoded(&mut d, &block), fields, "huffman {huffman}");
                assert_eq!(d.entries(), (table.clone(), *size), "huffman {huffman}");
            }
        }
    }

    #[test]
    fn malformed_blocks_are_refused_and_size_updates_bounded() {
        let refused = |block: &[u8]| {
            Decoder::new(DEFAULT_TABLE_SIZE)
                .decode(block, |_, _| {})
                .unwrap_err()
                .0
        };
        assert_eq!(refused(&[0x80]), "index 0");
        assert_eq!(refused(&[0xbe]), "an index past the dynamic table");
        assert_eq!(refused(&[0xff]), "an integer cut off by the block's end");
        assert_eq!(
            refused(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            "an integer over 2^32"
        );
        assert_eq!(
            refused(&[0x40, 0x05, b'a']),
            "a string literal longer than the rest of its block"
        );
        assert_eq!(
            refused(&[0x40]),
            "a string literal missing at the block's end"
        );
        // 4097: above the client's 4096.
        assert_eq!(
            refused(&[0x3f, 0xe2, 0x1f]),
            "a table size update above the client's SETTINGS_HEADER_TABLE_SIZE"
        );
        assert_eq!(refused(&[0x88, 0x20]), "a table size update after a field");
        assert_eq!(
            refused(&[0x40, 0x81, 0x00, 0x00]),
            "Huffman padding that is not EOS's first bits"
        );
        // An entry larger than the table empties it.
        let mut d = Decoder::new(64);
        decoded(&mut d, &[0x40, 0x01, b'a', 0x01, b'b']);
        assert_eq!(d.entries().1, 34);
        let big = [&[0x40, 0x01, b'n', 0x20][..], &[b'v'; 32]].concat();
        assert_eq!(decoded(&mut d, &big).len(), 1);
        assert_eq!(d.entries(), (vec![], 0));
        // A size update to 0 empties it too.
        decoded(&mut d, &[0x40, 0x01, b'a', 0x01, b'b']);
        decoded(&mut d, &[0x20]);
        assert_eq!(d.entries(), (vec![], 0));
    }

    /// What `Encoder` writes decodes, with `Decoder`, to the template's fields and the path:
    /// the first block adds, the next names by index, a smaller table is signalled.
    #[test]
    fn the_encoder_adds_the_template_once_and_names_it_after() {
        let fields = pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "127.0.0.1:8080"),
            ("user-agent", "concur/0.1.0"),
            ("accept", "*/*"),
            ("x-custom", "1"),
        ]);
        let t = Template::new(&fields, true);
        let mut e = Encoder::new();
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
        let with_path = |p: &str| {
            let mut all = pairs(&[(":path", p)]);
            all.extend(fields.iter().cloned());
            all
        };
        let mut sizes = Vec::new();
        for (i, path) in ["/a?x=1", "/b", "/c"].iter().enumerate() {
            let mut block = Vec::new();
            e.encode(&t, Head::Path(path), &mut block);
            assert_eq!(decoded(&mut d, &block), with_path(path), "request {i}");
            sizes.push(block.len());
        }
        // After the first, each field is one byte (two of them static), the path 2 + its length.
        assert_eq!(sizes[1], 1 + 1 + 2 + 6, "{sizes:?}");
        assert_eq!(d.entries().0.len(), 4);
        // The server shrinks its table below the template, then grows it: both updates go
        // out and the fields are added again.
        e.peer_table_size(100);
        e.peer_table_size(4096);
        let mut block = Vec::new();
        e.encode(&t, Head::Path("/d"), &mut block);
        assert_eq!(&block[..4], &[0x3f, 0x45, 0x3f, 0xe1]);
        assert_eq!(decoded(&mut d, &block), with_path("/d"));
        let mut block = Vec::new();
        e.encode(&t, Head::Path("/e"), &mut block);
        assert_eq!(block.len(), sizes[1], "the same length as /b");
        assert_eq!(decoded(&mut d, &block), with_path("/e"));
        // A server with no table: literals every time, and the path held by the template.
        let t = Template::new(&with_path("/same"), false);
        let mut e = Encoder::new();
        e.peer_table_size(0);
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
        for _ in 0..2 {
            let mut block = Vec::new();
            e.encode(&t, Head::Path("ignored"), &mut block);
            assert_eq!(decoded(&mut d, &block), with_path("/same"));
        }
        assert_eq!(d.entries(), (vec![], 0));
        // Fields of their own: literals, the table untouched.
        let own = with_path("/own");
        let mut block = Vec::new();
        Encoder::new().encode(&t, Head::Fields(&own), &mut block);
        let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
        assert_eq!(decoded(&mut d, &block), own);
        assert_eq!(d.entries(), (vec![], 0));
    }

    /// A prefix followed by endless continuation bytes of zero (the fuzzer's h2_frames crash:
    /// the shift overflowed) is refused, not decoded past 2^32 or shifted past 64 bits.
    #[test]
    fn an_integer_padded_with_zero_continuations_is_refused() {
        let mut block = vec![0x1f];
        block.extend([0x80; 40]);
        block.push(0);
        let mut at = 0;
        assert_eq!(
            integer(&block, &mut at, 5),
            Err(DecodeError("an integer over 2^32"))
        );
    }

    #[test]
    fn integers_round_trip_at_every_prefix() {
        for n in 1..=8 {
            for v in [
                0usize,
                1,
                30,
                31,
                127,
                128,
                255,
                1337,
                65_535,
                u32::MAX as usize,
            ] {
                let mut out = Vec::new();
                put_integer(&mut out, 0, n, v);
                let mut at = 0;
                assert_eq!(integer(&out, &mut at, n), Ok(v as u32), "{n} {v}");
                assert_eq!(at, out.len());
            }
        }
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        put_integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
    }
}
