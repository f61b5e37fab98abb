//! How long an MP4 file lasts (a Telegram video note, whose audio track is transcribed), read
//! from its own tables rather than taken from the sender's claim (see [`crate::agent::audio`]).
//!
//! An MP4 is a tree of boxes (ISO/IEC 14496-12): each a 32-bit size, a four-letter type and
//! a body, boxes of a container type nested in its body. The readings, the longest counts:
//! - what the file says: `moov/mvhd`'s duration over its timescale, and each track's
//!   `mdia/mdhd` duration over the track's timescale;
//! - what a decoder plays: each track's `stbl/stts` (sample count × sample delta, summed),
//!   which is how a demuxer times the samples, whatever the headers say.
//!
//! The byte-rate floor Ogg files get does not apply: a video note's bytes are mostly picture,
//! and the floor would call a 30-second note two minutes long. A file that has no `moov`
//! with at least one reading (fragmented MP4, or not MP4 at all) is `None`, and the caller
//! measures it by the floor.
//!
//! Pure and bounded: no recursion (the path to each box is walked in a fixed number of nested
//! loops), no allocation, each byte looked at a bounded number of times.
//!
//! ```
//! use heurist::agent::mp4::mp4_millis;
//! assert_eq!(mp4_millis(b"OggS not an mp4"), None);
//! ```

/// The milliseconds the MP4 in `bytes` lasts by the longest of its readings (module docs);
/// `None` when it is not an MP4 with a `moov` box holding one.
pub fn mp4_millis(bytes: &[u8]) -> Option<u64> {
    let moov = children(bytes).find(|b| &b.kind == b"moov")?;
    let mut longest: Option<u64> = None;
    let mut longer = |millis: Option<u64>| {
        if let Some(millis) = millis {
            longest = Some(longest.map_or(millis, |l| l.max(millis)));
        }
    };
    for child in children(moov.body) {
        match &child.kind {
            b"mvhd" => longer(header_millis(child.body)),
            b"trak" => {
                for mdia in children(child.body).filter(|b| &b.kind == b"mdia") {
                    let Some(mdhd) = children(mdia.body).find(|b| &b.kind == b"mdhd") else {
                        continue;
                    };
                    longer(header_millis(mdhd.body));
                    let timescale = header_timescale(mdhd.body);
                    let stts = children(mdia.body)
                        .filter(|b| &b.kind == b"minf")
                        .flat_map(|minf| children(minf.body))
                        .filter(|b| &b.kind == b"stbl")
                        .flat_map(|stbl| children(stbl.body))
                        .filter(|b| &b.kind == b"stts");
                    for table in stts {
                        longer(timescale.and_then(|t| millis(played_units(table.body), t)));
                    }
                }
            }
            _ => {}
        }
    }
    longest
}

/// One box: its four-letter type and its body.
#[derive(Debug, Clone, Copy)]
struct Mp4Box<'a> {
    kind: [u8; 4],
    body: &'a [u8],
}

/// The boxes one after the other in `bytes` (a file, or a container's body), until the bytes
/// end or a box's size does not fit in them.
fn children(bytes: &[u8]) -> impl Iterator<Item = Mp4Box<'_>> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let size = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        let kind: [u8; 4] = rest.get(4..8)?.try_into().ok()?;
        let (header, size) = match size {
            // The box runs to the end of its parent.
            0 => (8, rest.len()),
            // A 64-bit size follows the type.
            1 => {
                let large = u64::from_be_bytes(rest.get(8..16)?.try_into().ok()?);
                (16, usize::try_from(large).ok()?)
            }
            size => (8, usize::try_from(size).ok()?),
        };
        let body = rest.get(header..size)?;
        rest = &rest[size..];
        Some(Mp4Box { kind, body })
    })
}

/// The timescale and duration of an `mvhd` or `mdhd` body (version 0: 32-bit times, version
/// 1: 64-bit), laid out alike: version and flags, creation and modification times, timescale,
/// duration.
fn header_fields(body: &[u8]) -> Option<(u32, u64)> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?))
    };
    match body.first()? {
        0 => Some((be32(12)?, u64::from(be32(16)?))),
        1 => {
            let duration = u64::from_be_bytes(body.get(24..32)?.try_into().ok()?);
            Some((be32(20)?, duration))
        }
        _ => None,
    }
}

fn header_timescale(body: &[u8]) -> Option<u32> {
    header_fields(body).map(|(timescale, _)| timescale)
}

/// The milliseconds an `mvhd` or `mdhd` says; an unknown duration (all ones) says nothing.
fn header_millis(body: &[u8]) -> Option<u64> {
    let (timescale, duration) = header_fields(body)?;
    let unknown = duration == u64::from(u32::MAX) || duration == u64::MAX;
    if unknown {
        return None;
    }
    millis(duration, timescale)
}

/// The time units the samples of an `stts` body are played for: each entry's sample count
/// times its delta, summed (entries past the bytes present are not counted).
fn played_units(body: &[u8]) -> u64 {
    let Some(entries) = body.get(8..) else {
        return 0;
    };
    entries
        .chunks_exact(8)
        .map(|entry| {
            let count = u64::from(u32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]));
            let delta = u64::from(u32::from_be_bytes([entry[4], entry[5], entry[6], entry[7]]));
            count.saturating_mul(delta)
        })
        .fold(0, u64::saturating_add)
}

/// `units` of 1/`timescale` second in milliseconds; `None` for a timescale of 0.
fn millis(units: u64, timescale: u32) -> Option<u64> {
    (timescale > 0).then(|| {
        let ms = u128::from(units) * 1_000 / u128::from(timescale);
        u64::try_from(ms).unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A box of type `kind` around `body`.
    fn mp4_box(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut out = u32::try_from(body.len() + 8)
            .unwrap()
            .to_be_bytes()
            .to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(body);
        out
    }

    /// A version-0 `mvhd`/`mdhd` body with `timescale` and `duration`.
    fn header(timescale: u32, duration: u32) -> Vec<u8> {
        let mut body = vec![0; 12];
        body.extend_from_slice(&timescale.to_be_bytes());
        body.extend_from_slice(&duration.to_be_bytes());
        body.extend_from_slice(&[0; 8]);
        body
    }

    /// An `stts` body of `entries` (sample count, delta).
    fn stts(entries: &[(u32, u32)]) -> Vec<u8> {
        let mut body = vec![0; 4];
        body.extend_from_slice(&u32::try_from(entries.len()).unwrap().to_be_bytes());
        for (count, delta) in entries {
            body.extend_from_slice(&count.to_be_bytes());
            body.extend_from_slice(&delta.to_be_bytes());
        }
        body
    }

    /// A track with a `mdhd` of `timescale`/`duration` and samples timed by `entries`.
    fn track(timescale: u32, duration: u32, entries: &[(u32, u32)]) -> Vec<u8> {
        let stbl = mp4_box(b"stbl", &mp4_box(b"stts", &stts(entries)));
        let minf = mp4_box(b"minf", &stbl);
        let mdia = [mp4_box(b"mdhd", &header(timescale, duration)), minf].concat();
        mp4_box(b"trak", &mp4_box(b"mdia", &mdia))
    }

    /// A file whose header says it lasts 0 s, padded with `padding` bytes (hours of audio, say):
    /// measured as an audio file by the floor, as a video note never under the video floor.
    #[test]
    fn a_header_that_claims_nothing_cannot_carry_bytes_past_the_floors() {
        use crate::agent::audio::{
            FLOOR_BYTES_PER_SECOND, VIDEO_FLOOR_BYTES_PER_SECOND, measured_seconds,
        };
        let mut bytes = mp4_box(b"ftyp", b"isom");
        bytes.extend(mp4_box(b"moov", &mp4_box(b"mvhd", &header(1_000, 0))));
        bytes.extend(mp4_box(b"mdat", &vec![0; 2_560_000]));
        assert_eq!(mp4_millis(&bytes), Some(0));
        let len = bytes.len() as u64;
        assert_eq!(
            u64::from(measured_seconds(&bytes, false)),
            len / FLOOR_BYTES_PER_SECOND
        );
        assert_eq!(
            u64::from(measured_seconds(&bytes, true)),
            len / VIDEO_FLOOR_BYTES_PER_SECOND
        );
    }

    /// A video note's shape: `ftyp`, then `moov` with an `mvhd` of `seconds` and an audio
    /// track of 48 kHz AAC frames lasting `audio_seconds` by its header and its samples.
    fn video_note(seconds: u32, audio_seconds: u32) -> Vec<u8> {
        let frames = audio_seconds * 48_000 / 1_024;
        let audio = track(48_000, audio_seconds * 48_000, &[(frames, 1_024)]);
        let moov = [mp4_box(b"mvhd", &header(1_000, seconds * 1_000)), audio].concat();
        [
            mp4_box(b"ftyp", b"isom\0\0\0\0"),
            mp4_box(b"moov", &moov),
            mp4_box(b"mdat", &[0; 64]),
        ]
        .concat()
    }

    #[test]
    fn an_mp4_lasts_its_longest_reading() {
        let lying_headers = {
            let audio = track(48_000, 48_000, &[(46_875, 1_024)]);
            let moov = [mp4_box(b"mvhd", &header(1_000, 1_000)), audio].concat();
            mp4_box(b"moov", &moov)
        };
        let version_1 = {
            let mut body = vec![1, 0, 0, 0];
            body.extend_from_slice(&[0; 16]);
            body.extend_from_slice(&600u32.to_be_bytes());
            body.extend_from_slice(&(600u64 * 42).to_be_bytes());
            mp4_box(b"moov", &mp4_box(b"mvhd", &body))
        };
        let cases: [(&str, Vec<u8>, Option<u64>); 7] = [
            ("a video note", video_note(12, 12), Some(12_000)),
            ("the movie header longer", video_note(30, 2), Some(30_000)),
            (
                "headers say 1 s, samples play 1000 s",
                lying_headers,
                Some(1_000_000),
            ),
            ("version 1 header", version_1, Some(42_000)),
            ("no moov", mp4_box(b"ftyp", b"isom"), None),
            ("not an mp4", b"OggS\0\0 some bytes".to_vec(), None),
            (
                "a box larger than the file ends the walk",
                [mp4_box(b"moov", &[]), vec![0, 0, 0xff, 0xff]].concat(),
                None,
            ),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(mp4_millis(&bytes), want, "{name}");
        }
    }

    #[test]
    fn a_timescale_of_zero_or_an_unknown_duration_says_nothing() {
        let zero = mp4_box(b"moov", &mp4_box(b"mvhd", &header(0, 5)));
        let unknown = mp4_box(b"moov", &mp4_box(b"mvhd", &header(1_000, u32::MAX)));
        assert_eq!(mp4_millis(&zero), None);
        assert_eq!(mp4_millis(&unknown), None);
    }
}
