//! Crafted PDFs, built in the test so their hostility reads in the code: a form XObject that
//! draws itself (unbounded recursion in the parser), a page tree whose `/Parent` loops (a
//! lookup that never ends), and a content stream deflated twice over 1 GiB of spaces (a
//! decompression bomb), beside a valid one-line PDF. A small writer numbers the objects and
//! computes the cross-reference table; a small fixed-Huffman deflate encoder builds the bomb in
//! milliseconds, even in a debug build, without a compression crate doing a gigabyte's work.

/// A PDF of `objects` (object `n` is `objects[n - 1]`, its body without `obj`/`endobj`), with a
/// correct cross-reference table and `1 0 R` as its root.
pub(crate) fn pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// A stream object: `dict` (without its `/Length`) and `data`.
pub(crate) fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut out = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\nendstream");
    out
}

/// The catalog and a one-page tree whose page is object 3.
fn catalog_and_pages() -> Vec<Vec<u8>> {
    vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
    ]
}

/// A valid one-page PDF whose text is `line` (ASCII, no parentheses or backslashes).
pub(crate) fn one_line(line: &str) -> Vec<u8> {
    let mut objects = catalog_and_pages();
    objects.push(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
          /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_vec(),
    );
    let content = format!("BT /F1 12 Tf 72 720 Td ({line}) Tj ET");
    objects.push(stream("", content.as_bytes()));
    objects.push(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    );
    pdf(&objects)
}

/// About 800 bytes: the page draws form XObject `/X0`, whose own content draws `/X0` again.
/// The parser follows `Do` by recursion: its stack overflows, which aborts the process.
pub(crate) fn self_drawing_form() -> Vec<u8> {
    let mut objects = catalog_and_pages();
    objects.push(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R \
          /Resources << /XObject << /X0 4 0 R >> >> >>"
            .to_vec(),
    );
    objects.push(stream(
        "/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /X0 4 0 R >> >>",
        b"/X0 Do",
    ));
    objects.push(stream("", b"/X0 Do"));
    pdf(&objects)
}

/// About 450 bytes: the page has no `/Resources` nor `/MediaBox`, so the parser looks for them
/// up the page tree, whose node is its own `/Parent`: the lookup never ends (or, where the
/// compiler keeps the recursion, overflows the stack).
pub(crate) fn looping_page_tree() -> Vec<u8> {
    pdf(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 /Parent 2 0 R >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>".to_vec(),
        stream("", b"BT ET"),
    ])
}

/// The page's content is `/Filter [/FlateDecode /FlateDecode]` over `spaces` spaces (1 GiB in
/// the tests: about 50 kB of PDF). A parser that inflates it whole holds a gigabyte or more.
pub(crate) fn flate_bomb(spaces: u64) -> Vec<u8> {
    let mut objects = catalog_and_pages();
    objects.push(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << >> >>"
            .to_vec(),
    );
    let twice = zlib_repeating(&zlib_spaces(spaces));
    objects.push(stream("/Filter [/FlateDecode /FlateDecode]", &twice));
    pdf(&objects)
}

/// A zlib stream of `n` (≥ 1) spaces: one literal, then matches of 258 bytes at distance 1, so
/// 13 bits of output per 258 bytes and no work proportional to `n` but a loop over the matches.
pub(crate) fn zlib_spaces(n: u64) -> Vec<u8> {
    let mut deflate = FixedDeflate::default();
    deflate.literal(b' ');
    let mut left = n - 1;
    while left >= 3 {
        let len = left.min(258);
        deflate.copy(len as u16, 1);
        left -= len;
    }
    for _ in 0..left {
        deflate.literal(b' ');
    }
    zlib(deflate.finish(), adler32_of_spaces(n))
}

/// `data` as a zlib stream, compressed only by repeats at distances up to 32 bytes, which is all
/// the periodic output of [`zlib_spaces`] needs (its bits repeat every 13 bytes).
pub(crate) fn zlib_repeating(data: &[u8]) -> Vec<u8> {
    let mut deflate = FixedDeflate::default();
    let mut at = 0;
    while at < data.len() {
        let (len, dist) = longest_repeat(data, at);
        if len >= 3 {
            deflate.copy(len as u16, dist as u16);
            at += len;
        } else {
            deflate.literal(data[at]);
            at += 1;
        }
    }
    zlib(deflate.finish(), adler32(data))
}

/// The longest match (up to 258 bytes) of `data[at..]` at a distance of 1 to 32 bytes back.
fn longest_repeat(data: &[u8], at: usize) -> (usize, usize) {
    let mut best = (0, 0);
    for dist in 1..=at.min(32) {
        let len = (0..258.min(data.len() - at))
            .take_while(|&i| data[at + i] == data[at + i - dist])
            .count();
        if len > best.0 {
            best = (len, dist);
            if len == 258 {
                break;
            }
        }
    }
    best
}

/// The zlib frame: a header (deflate, 32 KiB window, no dictionary), the data, its Adler-32.
fn zlib(deflate: Vec<u8>, adler: u32) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    out.extend_from_slice(&deflate);
    out.extend_from_slice(&adler.to_be_bytes());
    out
}

/// Adler-32's modulus.
const ADLER: u64 = 65_521;

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u64, 0u64);
    for &byte in data {
        a = (a + u64::from(byte)) % ADLER;
        b = (b + a) % ADLER;
    }
    ((b << 16) | a) as u32
}

/// Adler-32 of `n` spaces in closed form: after byte `i` (1-based), a = 1 + 32 i, and b is the
/// sum of those.
fn adler32_of_spaces(n: u64) -> u32 {
    let n = u128::from(n);
    let a = (1 + 32 * n) % u128::from(ADLER);
    let b = (n + 32 * (n * (n + 1) / 2)) % u128::from(ADLER);
    ((b << 16) | a) as u32
}

/// One final deflate block with the fixed Huffman codes (RFC 1951, 3.2.6).
struct FixedDeflate {
    out: Vec<u8>,
    bits: u64,
    count: u32,
}

impl Default for FixedDeflate {
    fn default() -> Self {
        let mut deflate = Self {
            out: Vec::new(),
            bits: 0,
            count: 0,
        };
        // BFINAL = 1, BTYPE = 01 (fixed Huffman codes).
        deflate.put(1, 1);
        deflate.put(1, 2);
        deflate
    }
}

/// Lengths 3-258: the base of each length code from 257, and its extra bits.
const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u32; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// Distances 1-32 (all the encoder uses): the base of codes 0-9, and their extra bits.
const DIST_BASE: [u16; 10] = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25];
const DIST_EXTRA: [u32; 10] = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3];

impl FixedDeflate {
    /// `count` bits of `value`, least significant first.
    fn put(&mut self, value: u32, count: u32) {
        self.bits |= u64::from(value) << self.count;
        self.count += count;
        while self.count >= 8 {
            self.out.push(self.bits as u8);
            self.bits >>= 8;
            self.count -= 8;
        }
    }

    /// A Huffman code of `len` bits, which deflate writes most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }

    /// The fixed code of literal/length symbol `symbol`.
    fn symbol(&mut self, symbol: u16) {
        let s = u32::from(symbol);
        match symbol {
            0..=143 => self.code(0x30 + s, 8),
            144..=255 => self.code(0x190 + s - 144, 9),
            256..=279 => self.code(s - 256, 7),
            _ => self.code(0xC0 + s - 280, 8),
        }
    }

    fn literal(&mut self, byte: u8) {
        self.symbol(u16::from(byte));
    }

    /// Copy `len` (3-258) bytes from `dist` (1-32) back.
    fn copy(&mut self, len: u16, dist: u16) {
        let at = LENGTH_BASE.iter().rposition(|&base| base <= len).unwrap();
        self.symbol(257 + at as u16);
        self.put(u32::from(len - LENGTH_BASE[at]), LENGTH_EXTRA[at]);
        let at = DIST_BASE.iter().rposition(|&base| base <= dist).unwrap();
        self.code(at as u32, 5);
        self.put(u32::from(dist - DIST_BASE[at]), DIST_EXTRA[at]);
    }

    /// Ends the block and pads the last byte.
    fn finish(mut self) -> Vec<u8> {
        self.symbol(256);
        if self.count > 0 {
            self.out.push(self.bits as u8);
        }
        self.out
    }
}
