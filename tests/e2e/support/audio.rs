//! Audio for the speech tests: WAV files as speech servers answer them, and what an Ogg Opus
//! voice note says of itself, read with the same Ogg reader the bot writes with.

use std::f64::consts::PI;
use std::io::Cursor;

/// `seconds` of a 440 Hz tone as a 16-bit mono WAV file at `rate`.
pub(crate) fn wav_tone(rate: u32, seconds: f64) -> Vec<u8> {
    let frames = (f64::from(rate) * seconds) as usize;
    let data: Vec<u8> = (0..frames)
        .flat_map(|i| {
            let t = i as f64 / f64::from(rate);
            ((0.4 * 32_767.0 * (2.0 * PI * 440.0 * t).sin()) as i16).to_le_bytes()
        })
        .collect();
    let mut wav = b"RIFF".to_vec();
    wav.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt \x10\0\0\0\x01\0\x01\0");
    wav.extend_from_slice(&rate.to_le_bytes());
    wav.extend_from_slice(&(rate * 2).to_le_bytes());
    wav.extend_from_slice(b"\x02\0\x10\0data");
    wav.extend_from_slice(&(data.len() as u32).to_le_bytes());
    wav.extend_from_slice(&data);
    wav
}

/// What an Ogg Opus file's `OpusHead` and last page say.
#[derive(Debug)]
pub(crate) struct OpusInfo {
    pub(crate) channels: u8,
    /// 48 kHz samples the decoder drops at the start.
    pub(crate) pre_skip: u64,
    /// The rate the audio came at.
    pub(crate) input_rate: u32,
    /// How long it plays: the last granule position less the pre-skip, at 48 kHz.
    pub(crate) seconds: f64,
    /// Audio packets after the two headers.
    pub(crate) packets: usize,
}

/// Reads `bytes` as an Ogg Opus stream; panics where it is not one (RFC 7845: `OpusHead`
/// version 1 alone on the first page, then `OpusTags`).
pub(crate) fn opus_info(bytes: &[u8]) -> OpusInfo {
    let mut reader = ogg::PacketReader::new(Cursor::new(bytes));
    let head = reader.read_packet_expected().expect("an Ogg page");
    let h = &head.data;
    assert!(
        h.len() >= 19 && h.starts_with(b"OpusHead"),
        "OpusHead: {h:?}"
    );
    assert_eq!(h[8], 1, "OpusHead version 1");
    assert!(
        head.first_in_stream() && head.last_in_page(),
        "OpusHead alone on page one"
    );
    let tags = reader.read_packet_expected().expect("OpusTags");
    assert!(tags.data.starts_with(b"OpusTags"), "OpusTags second");
    let (mut last_granule, mut packets) = (0, 0);
    while let Some(packet) = reader.read_packet().expect("whole Ogg pages") {
        packets += 1;
        last_granule = packet.absgp_page();
    }
    let pre_skip = u64::from(u16::from_le_bytes([h[10], h[11]]));
    OpusInfo {
        channels: h[9],
        pre_skip,
        input_rate: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
        seconds: (last_granule.saturating_sub(pre_skip)) as f64 / 48_000.0,
        packets,
    }
}
