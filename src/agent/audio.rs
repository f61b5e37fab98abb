//! How long a recording lasts, read from its bytes rather than taken from the sender: the
//! duration a Telegram update states is what the sender's client claims, so a 20 MB file can
//! say it lasts 5 s. The measure caps what is sent to the transcription server and what is
//! reserved of the sender's budget.
//!
//! A voice note is Opus in Ogg (RFC 7845). Two readings of it, the longer counts:
//! - what the stream says: the granule position of its last page (the 48 kHz samples decoded
//!   by its end) less the stream's pre-skip, found by one bounded scan back from the end for
//!   the last page header;
//! - what a decoder will decode: each audio packet's length, read from its first byte (the
//!   TOC: frame size and frame count, RFC 6716), over every page. A forged last granule
//!   cannot make a long stream short this way.
//!
//! A video note's MP4 is measured from its own tables instead, by [`crate::agent::mp4`], never
//! under a video floor ([`VIDEO_FLOOR_BYTES_PER_SECOND`]: its bytes are mostly picture); an
//! audio file keeps the audio floor whatever its tables say (an `.m4a` whose header claims
//! 0 s must not carry hours past the caps and the budget).
//!
//! Any other file (or Ogg that is not Opus) is measured by a floor from its size at
//! [`FLOOR_BYTES_PER_SECOND`], a bitrate above any lossy codec's, so the floor never says
//! longer than a compressed recording is; uncompressed or lossless audio (WAV, FLAC) it
//! over-measures. An Opus file is never measured under that floor either.
//!
//! Pure and bounded: no recursion, no allocation, two passes over the input at most.
//!
//! ```
//! use heurist::agent::audio::measured_seconds;
//! assert_eq!(measured_seconds(b"not audio at all", false), 0);
//! assert_eq!(measured_seconds(&vec![0; 640_000], false), 10, "ten seconds at the floor's bitrate");
//! ```

use super::mp4::mp4_millis;

/// The floor's bitrate, 512 kbit/s in bytes: above MP3's and AAC's highest (320 kbit/s) and
/// Opus's (510 kbit/s), so a compressed recording lasts at least its size over this.
pub const FLOOR_BYTES_PER_SECOND: u64 = 64_000;

/// A video note's floor: 2 Mbit/s, well above what Telegram's round videos take.
pub const VIDEO_FLOOR_BYTES_PER_SECOND: u64 = 256_000;

/// Opus counts time in 48 kHz samples, whatever the input's rate (RFC 7845).
const OPUS_RATE: u64 = 48_000;

/// The longest Opus packet a decoder accepts: 120 ms (RFC 6716 §3.2.5).
const MAX_PACKET_SAMPLES: u64 = 5_760;

/// An Ogg page header up to its segment table: capture pattern, version, flags, granule
/// position, serial number, sequence number, checksum and the number of segments.
const PAGE_HEADER: usize = 27;

/// The granule position of a page on which no packet ends (RFC 3533).
const NO_GRANULE: u64 = u64::MAX;

/// At least how many seconds the recording in `bytes` lasts (rounded to the nearest second):
/// the longer reading of its Opus stream, never under the size floor, or the floor alone (see
/// the module docs); a `video` note's MP4 by its tables, never under the video floor.
pub fn measured_seconds(bytes: &[u8], video: bool) -> u32 {
    let floor = bytes.len() as u64 / FLOOR_BYTES_PER_SECOND;
    let mp4 = if video { mp4_millis(bytes) } else { None };
    let seconds = match (opus_samples(bytes), mp4) {
        (Some(samples), _) => (samples.saturating_add(OPUS_RATE / 2) / OPUS_RATE).max(floor),
        (None, Some(millis)) => (millis.saturating_add(500) / 1_000)
            .max(bytes.len() as u64 / VIDEO_FLOOR_BYTES_PER_SECOND),
        (None, None) => floor,
    };
    u32::try_from(seconds).unwrap_or(u32::MAX)
}

/// The samples an Ogg Opus file lasts: the longer of what its last granule position says (less
/// the pre-skip) and what its packets decode to; `None` when `bytes` is not Opus in Ogg.
fn opus_samples(bytes: &[u8]) -> Option<u64> {
    let first = OggPage::at(bytes, 0)?;
    let head = bytes.get(first.body..first.end)?;
    if !head.starts_with(b"OpusHead") {
        return None;
    }
    let pre_skip = u64::from(u16::from_le_bytes([*head.get(10)?, *head.get(11)?]));
    let stated =
        last_page(bytes, first.serial).map_or(0, |last| last.granule.saturating_sub(pre_skip));
    Some(stated.max(decoded_samples(bytes)))
}

/// The last page of stream `serial` on which a packet ends: scanned back from the end, each
/// byte looked at once. A page of another stream (a chained or multiplexed file) ends the
/// scan with `None`: its granule says nothing of this stream's length.
fn last_page(bytes: &[u8], serial: u32) -> Option<OggPage> {
    let mut end = bytes.len();
    while let Some(at) = bytes[..end].windows(4).rposition(|w| w == b"OggS") {
        if let Some(page) = OggPage::at(bytes, at) {
            if page.serial != serial {
                return None;
            }
            if page.granule != NO_GRANULE {
                return Some(page);
            }
        }
        // The next search ends before this match's last byte: no position is read twice.
        end = at + 3;
    }
    None
}

/// The samples every Opus packet of every page decodes to, from page to page (bytes between
/// pages are skipped to the next page header, as a demuxer resynchronises). The first two
/// pages hold the headers (`OpusHead` alone on the first, `OpusTags` starting on the second;
/// audio starts on a page of its own, RFC 7845 §3) and count nothing: by their place, not
/// their content, so audio packets cannot pass for headers.
fn decoded_samples(bytes: &[u8]) -> u64 {
    let mut samples: u64 = 0;
    let mut pages: usize = 0;
    let mut at = 0;
    while let Some(found) = bytes
        .get(at..)
        .and_then(|rest| rest.windows(4).position(|w| w == b"OggS"))
    {
        at += found;
        let Some(page) = OggPage::at(bytes, at) else {
            at += 1;
            continue;
        };
        if pages >= 2 {
            samples = samples.saturating_add(page.samples(bytes));
        }
        pages += 1;
        at = page.end;
    }
    samples
}

/// The 48 kHz samples of one Opus packet that starts with `first` (its TOC byte), then
/// `second` (its frame count, for a packet of code 3): frame size times frames (RFC 6716
/// §3.1), at most 120 ms, as a decoder refuses longer packets.
fn packet_samples(first: u8, second: Option<u8>) -> u64 {
    let config = usize::from(first >> 3);
    let frame: u64 = match config {
        // SILK: 10, 20, 40 or 60 ms.
        0..=11 => [480, 960, 1_920, 2_880][config % 4],
        // Hybrid: 10 or 20 ms.
        12..=15 => [480, 960][config % 2],
        // CELT: 2.5, 5, 10 or 20 ms.
        _ => [120, 240, 480, 960][config % 4],
    };
    let frames = match first & 3 {
        0 => 1,
        1 | 2 => 2,
        _ => second.map_or(0, |count| u64::from(count & 0x3f)),
    };
    (frame * frames).min(MAX_PACKET_SAMPLES)
}

/// What the measure reads of one Ogg page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OggPage {
    granule: u64,
    serial: u32,
    /// The first packet on the page continues one from an earlier page.
    continued: bool,
    /// Where the segment table starts, and how many lacing values it has.
    table: usize,
    segments: usize,
    /// Where the page's body starts (after its segment table) and where the page ends.
    body: usize,
    end: usize,
}

impl OggPage {
    /// The page that starts at `at`, when a whole version-0 page is there.
    fn at(bytes: &[u8], at: usize) -> Option<Self> {
        let header = bytes.get(at..at.checked_add(PAGE_HEADER)?)?;
        if &header[..4] != b"OggS" || header[4] != 0 {
            return None;
        }
        let granule = u64::from_le_bytes(header[6..14].try_into().ok()?);
        let serial = u32::from_le_bytes(header[14..18].try_into().ok()?);
        let (table, segments) = (at + PAGE_HEADER, usize::from(header[26]));
        let lacing = bytes.get(table..table + segments)?;
        let body = table + segments;
        let end = body + lacing.iter().map(|&l| usize::from(l)).sum::<usize>();
        (end <= bytes.len()).then_some(Self {
            granule,
            serial,
            continued: header[5] & 1 != 0,
            table,
            segments,
            body,
            end,
        })
    }

    /// The samples of the Opus packets that start on this page (a packet's first segment is
    /// where its TOC byte is; a lacing value of 255 means the packet goes on).
    fn samples(self, bytes: &[u8]) -> u64 {
        let mut samples: u64 = 0;
        let mut starts = !self.continued;
        let mut offset = self.body;
        for &lacing in &bytes[self.table..self.table + self.segments] {
            let segment = &bytes[offset..offset + usize::from(lacing)];
            if let (true, Some(&first)) = (starts, segment.first()) {
                samples += packet_samples(first, segment.get(1).copied());
            }
            starts = lacing < 255;
            offset += usize::from(lacing);
        }
        samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ogg page of stream `serial` whose last packet ends at `granule`, carrying `packets`.
    fn page(granule: u64, serial: u32, packets: &[&[u8]]) -> Vec<u8> {
        let mut lacing = Vec::new();
        for packet in packets {
            lacing.extend(packet.chunks(255).map(|c| c.len() as u8));
            if packet.len() % 255 == 0 {
                lacing.push(0);
            }
        }
        let mut page = b"OggS\0\0".to_vec();
        page.extend_from_slice(&granule.to_le_bytes());
        page.extend_from_slice(&serial.to_le_bytes());
        page.extend_from_slice(&[0; 8]); // sequence number and checksum
        page.push(lacing.len() as u8);
        page.extend_from_slice(&lacing);
        page.extend(packets.concat());
        page
    }

    /// The identification header of an Opus stream with `pre_skip` samples to drop.
    fn opus_head(pre_skip: u16) -> Vec<u8> {
        let mut head = b"OpusHead\x01\x01".to_vec();
        head.extend_from_slice(&pre_skip.to_le_bytes());
        head.extend_from_slice(&48_000u32.to_le_bytes());
        head.extend_from_slice(&[0, 0, 0]);
        head
    }

    /// One 20 ms CELT frame (TOC config 31, code 0) with some payload.
    const FRAME_20MS: &[u8] = &[0xF8, 1, 2, 3];

    /// A voice note's headers, then one page of a 20 ms packet per granule in `granules`.
    fn voice_note(pre_skip: u16, granules: &[u64]) -> Vec<u8> {
        let mut file = page(0, 7, &[&opus_head(pre_skip)]);
        file.extend(page(0, 7, &[b"OpusTags\0\0\0\0\0\0\0\0"]));
        for &granule in granules {
            file.extend(page(granule, 7, &[FRAME_20MS]));
        }
        file
    }

    fn seconds(s: u64) -> u64 {
        s * OPUS_RATE
    }

    #[test]
    fn a_recording_is_measured_from_its_bytes() {
        let mut torn = voice_note(312, &[seconds(4), seconds(9)]);
        torn.truncate(torn.len() - 2);
        let mut trailing = voice_note(0, &[seconds(7)]);
        trailing.extend_from_slice(b"OggS\0 a header cut short");
        let mut vorbis = page(0, 7, &[b"\x01vorbis"]);
        vorbis.extend(page(seconds(600), 7, &[&[0; 10]]));
        let mut forged = voice_note(0, &[]);
        // Ten minutes of 120 ms packets (six 20 ms CELT frames each), five to a page, under
        // a last page that claims one second.
        let packet: &[u8] = &[0xFB, 6, 9, 9];
        for n in 0..1_000 {
            let granule = if n == 999 { seconds(1) } else { NO_GRANULE };
            forged.extend(page(granule, 7, &[packet; 5]));
        }
        let mut chained = voice_note(312, &[seconds(1)]);
        chained.extend(page(0, 9, &[&opus_head(0)]));
        chained.extend(page(seconds(600), 9, &[FRAME_20MS]));
        let mut padded = voice_note(0, &[seconds(1)]);
        padded.resize(3_200_000, 0);
        let cases: [(&str, Vec<u8>, u32); 13] = [
            (
                "a voice note",
                voice_note(312, &[seconds(2), seconds(5)]),
                5,
            ),
            (
                "the pre-skip is not audio",
                voice_note(24_000, &[seconds(5) + 24_000]),
                5,
            ),
            (
                "rounded to the nearest second",
                voice_note(0, &[seconds(5) + 23_999, seconds(6) + 24_000]),
                7,
            ),
            (
                "a last page on which no packet ends is passed over",
                voice_note(0, &[seconds(3), NO_GRANULE]),
                3,
            ),
            ("a torn last page is passed over", torn, 4),
            ("trailing bytes that are no page", trailing, 7),
            (
                "a long note labelled short is long",
                voice_note(312, &[seconds(600)]),
                600,
            ),
            (
                "a granule past any length is not wrapped",
                voice_note(0, &[u64::MAX - 1]),
                u32::MAX,
            ),
            ("a forged last granule: the packets count", forged, 600),
            (
                "audio dressed as a header counts",
                {
                    // "O" is a TOC byte too: 20 ms SILK frames, as many as "p" says (48),
                    // counted as 120 ms, the most one packet may hold.
                    let tags: &[u8] = b"OpusTags\xff";
                    let mut file = voice_note(0, &[seconds(1)]);
                    for _ in 0..100 {
                        file.extend(page(NO_GRANULE, 7, &[tags; 10]));
                    }
                    file
                },
                120,
            ),
            (
                "a chained file: a granule of another stream is not this one's; packets count",
                chained,
                0,
            ),
            ("padding: the size floor", padded, 50),
            ("Ogg that is not Opus: the floor", vorbis, 0),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(measured_seconds(&bytes, false), want, "{name}");
        }
        assert_eq!(
            measured_seconds(&vec![b'x'; 1_280_000], false),
            20,
            "no Ogg: the floor"
        );
    }

    #[test]
    fn a_packet_lasts_what_its_toc_byte_says() {
        // A TOC byte: the configuration (mode and frame size) over the frame-count code.
        let toc = |config: u8, code: u8| config << 3 | code;
        let cases = [
            ("SILK 10 ms, one frame", toc(0, 0), None, 480),
            ("SILK 60 ms, two frames", toc(3, 1), None, 5_760),
            (
                "hybrid 20 ms, two frames of two sizes",
                toc(15, 2),
                None,
                1_920,
            ),
            ("CELT 2.5 ms, one frame", toc(16, 0), None, 120),
            ("CELT 20 ms, three frames", toc(31, 3), Some(3), 2_880),
            (
                "the count byte's flags are no frames",
                toc(31, 3),
                Some(0xC2),
                1_920,
            ),
            (
                "over 120 ms is what a decoder takes",
                toc(31, 3),
                Some(48),
                5_760,
            ),
            ("code 3 without its count byte", toc(31, 3), None, 0),
        ];
        for (name, first, second, want) in cases {
            assert_eq!(packet_samples(first, second), want, "{name}");
        }
    }

    #[test]
    fn hostile_bytes_are_measured_without_panic() {
        let cases: [(&str, &[u8]); 6] = [
            ("empty", b""),
            ("a capture pattern alone", b"OggS"),
            ("a header cut short", b"OggS\0\0\0\0\0\0\0\0\0\0\0\0"),
            ("only capture patterns", b"OggSOggSOggSOggSOggSOggSOggS"),
            (
                "an OpusHead cut short",
                b"OggS\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01\x08OpusHead",
            ),
            (
                "a segment table past the end",
                b"OggS\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\xff",
            ),
        ];
        for (name, bytes) in cases {
            assert_eq!(measured_seconds(bytes, false), 0, "{name}");
        }
    }
}
