//! Mono audio encoded by libopus and put in an Ogg stream as RFC 7845 says: an `OpusHead`
//! page (its pre-skip the encoder's look-ahead), an `OpusTags` page, then 20 ms packets, a
//! page a second, each page's granule position the 48 kHz samples decodable through it. The
//! last page's granule is the pre-skip plus the input's length, so a player trims the padding
//! of the last packet and the voice note lasts exactly as long as the audio did.

use std::io;

use ogg::writing::{PacketWriteEndInfo, PacketWriter};
use opus::{Application, Bitrate, Channels, Encoder};

/// The rates libopus encodes from; the granule positions count at the last of them.
pub(super) const OPUS_RATES: [u32; 5] = [8_000, 12_000, 16_000, 24_000, 48_000];
const GRANULE_RATE: u32 = 48_000;

/// One packet per 20 ms (Opus' default frame); a page per second.
const PACKETS_A_SECOND: u32 = 50;

/// Bits a second: clear speech in a voice note (Telegram's own are about this).
const BITRATE: i32 = 32_000;

/// Largest Opus packet (RFC 6716: 1275 bytes a frame, up to 3 frames, plus framing).
const MAX_PACKET: usize = 4_000;

/// The stream's serial number: one stream a file, so any number does.
const SERIAL: u32 = 0x4845_5552;

/// Why audio could not be encoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EncodeError {
    #[error("libopus: {0}")]
    Opus(#[from] opus::Error),
    #[error("writing the Ogg stream: {0}")]
    Ogg(#[from] io::Error),
}

/// `len` samples at `rate` (one of [`OPUS_RATES`]), sample `i` given by `sample(i)`, as an
/// Ogg Opus file; `input_rate` is the rate the audio came at, recorded in `OpusHead`.
pub(super) fn encode(
    rate: u32,
    len: usize,
    input_rate: u32,
    sample: impl Fn(usize) -> f32,
) -> Result<Vec<u8>, EncodeError> {
    debug_assert!(OPUS_RATES.contains(&rate));
    let mut encoder = Encoder::new(rate, Channels::Mono, Application::Voip)?;
    encoder.set_bitrate(Bitrate::Bits(BITRATE))?;
    let lookahead = usize::try_from(encoder.get_lookahead()?).unwrap_or(0);
    let scale = u64::from(GRANULE_RATE / rate);
    let pre_skip = lookahead as u64 * scale;
    let frame = (rate / PACKETS_A_SECOND) as usize;
    // The encoder gives its look-ahead back as delay: feed that much silence after the audio.
    let packets = (len + lookahead).div_ceil(frame);
    let end = pre_skip + len as u64 * scale;

    let mut writer = PacketWriter::new(Vec::new());
    let end_page = PacketWriteEndInfo::EndPage;
    writer.write_packet(opus_head(pre_skip, input_rate), SERIAL, end_page, 0)?;
    writer.write_packet(opus_tags(), SERIAL, end_page, 0)?;
    let mut pcm = vec![0f32; frame];
    let mut packet = vec![0u8; MAX_PACKET];
    for index in 0..packets {
        for (i, slot) in pcm.iter_mut().enumerate() {
            let at = index * frame + i;
            *slot = if at < len { sample(at) } else { 0.0 };
        }
        let size = encoder.encode_float(&pcm, &mut packet)?;
        let done = index + 1;
        let granule = (done as u64 * frame as u64 * scale).min(end);
        let info = if done == packets {
            PacketWriteEndInfo::EndStream
        } else if done % PACKETS_A_SECOND as usize == 0 {
            end_page
        } else {
            PacketWriteEndInfo::NormalPacket
        };
        writer.write_packet(packet[..size].to_vec(), SERIAL, info, granule)?;
    }
    Ok(writer.into_inner())
}

/// The identification header: version 1, one channel, `pre_skip` (48 kHz samples), the input
/// rate, no gain, channel mapping family 0.
fn opus_head(pre_skip: u64, input_rate: u32) -> Vec<u8> {
    let mut head = b"OpusHead\x01\x01".to_vec();
    head.extend_from_slice(&u16::try_from(pre_skip).unwrap_or(u16::MAX).to_le_bytes());
    head.extend_from_slice(&input_rate.to_le_bytes());
    head.extend_from_slice(&[0, 0, 0]);
    head
}

/// The comment header: the encoder's name and no comments.
fn opus_tags() -> Vec<u8> {
    let vendor = opus::version().as_bytes();
    let mut tags = b"OpusTags".to_vec();
    tags.extend_from_slice(&u32::try_from(vendor.len()).unwrap_or(0).to_le_bytes());
    tags.extend_from_slice(vendor);
    tags.extend_from_slice(&0u32.to_le_bytes());
    tags
}
