use std::f64::consts::PI;
use std::io::Cursor;

use super::wav::tests::{pcm16, wav};
use super::*;

/// What an Ogg Opus file says of itself, and its audio decoded by libopus (48 kHz, mono),
/// pre-skip and end padding trimmed.
struct Decoded {
    channels: u8,
    pre_skip: u64,
    input_rate: u32,
    last_granule: u64,
    pcm: Vec<f32>,
}

fn decode(bytes: &[u8]) -> Decoded {
    let mut reader = ogg::PacketReader::new(Cursor::new(bytes));
    let head = reader.read_packet_expected().unwrap();
    assert!(head.data.starts_with(b"OpusHead\x01"), "OpusHead first");
    assert!(
        head.first_in_stream() && head.last_in_page(),
        "OpusHead alone on the first page"
    );
    let pre_skip = u64::from(u16::from_le_bytes([head.data[10], head.data[11]]));
    let input_rate = u32::from_le_bytes(head.data[12..16].try_into().unwrap());
    let tags = reader.read_packet_expected().unwrap();
    assert!(tags.data.starts_with(b"OpusTags") && tags.last_in_page());
    let mut decoder = opus::Decoder::new(48_000, opus::Channels::Mono).unwrap();
    let (mut pcm, mut last_granule) = (Vec::new(), 0);
    while let Some(packet) = reader.read_packet().unwrap() {
        let mut out = vec![0f32; 5_760];
        let n = decoder.decode_float(&packet.data, &mut out, false).unwrap();
        pcm.extend_from_slice(&out[..n]);
        if packet.last_in_stream() {
            last_granule = packet.absgp_page();
        }
    }
    let end = usize::try_from(last_granule).unwrap();
    assert!(
        end <= pcm.len(),
        "the last granule is within the decoded audio"
    );
    pcm.truncate(end);
    pcm.drain(..usize::try_from(pre_skip).unwrap());
    Decoded {
        channels: head.data[9],
        pre_skip,
        input_rate,
        last_granule,
        pcm,
    }
}

/// `seconds` of a 440 Hz tone of amplitude 0.5 at `rate`, as 16-bit samples, on `channels`.
fn tone(rate: u32, channels: u16, seconds: f64) -> Vec<i16> {
    let frames = (f64::from(rate) * seconds) as usize;
    (0..frames)
        .flat_map(|i| {
            let s = (0.5 * 32_767.0 * (2.0 * PI * 440.0 * i as f64 / f64::from(rate)).sin()) as i16;
            std::iter::repeat_n(s, usize::from(channels))
        })
        .collect()
}

fn rms(samples: &[f32]) -> f32 {
    (samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32).sqrt()
}

#[test]
fn wav_becomes_ogg_opus_that_decodes_to_the_same_audio_and_length() {
    let eight_bit: Vec<u8> = tone(16_000, 1, 0.5)
        .iter()
        .map(|s| ((s >> 8) + 128) as u8)
        .collect();
    let cases = [
        (
            "16-bit mono 22.05 kHz (Piper)",
            wav(22_050, 1, 16, &pcm16(&tone(22_050, 1, 1.3)), None),
            22_050,
            1.3,
        ),
        (
            "16-bit stereo 44.1 kHz",
            wav(44_100, 2, 16, &pcm16(&tone(44_100, 2, 0.7)), None),
            44_100,
            0.7,
        ),
        (
            "16-bit mono 24 kHz (Kokoro, OpenAI), no resampling",
            wav(24_000, 1, 16, &pcm16(&tone(24_000, 1, 2.0)), None),
            24_000,
            2.0,
        ),
        (
            "8-bit mono 16 kHz",
            wav(16_000, 1, 8, &eight_bit, None),
            16_000,
            0.5,
        ),
        (
            "a data chunk claiming 4 GB",
            wav(24_000, 1, 16, &pcm16(&tone(24_000, 1, 0.4)), Some(u32::MAX)),
            24_000,
            0.4,
        ),
    ];
    for (name, bytes, rate, seconds) in cases {
        let (ogg, from) = voice_note(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(from, Format::Wav, "{name}");
        assert_eq!(detect(&ogg), Format::OggOpus, "{name}");
        let decoded = decode(&ogg);
        assert_eq!((decoded.channels, decoded.input_rate), (1, rate), "{name}");
        assert!(
            decoded.pre_skip > 0,
            "{name}: the encoder's look-ahead is skipped"
        );
        let lasts = (decoded.last_granule - decoded.pre_skip) as f64 / 48_000.0;
        assert!(
            (lasts - seconds).abs() < 0.001,
            "{name}: lasts {lasts} s, not {seconds}"
        );
        // The tone comes back at its loudness (0.5 / √2), edges aside.
        let n = decoded.pcm.len();
        let loudness = rms(&decoded.pcm[n / 5..n * 4 / 5]);
        assert!((loudness - 0.354).abs() < 0.05, "{name}: rms {loudness}");
    }
}

#[test]
fn what_cannot_be_a_voice_note_is_refused_by_name() {
    let ten_minutes = wav(8_000, 1, 8, &vec![128; 8_000 * 600], None);
    let cases: [(&str, Vec<u8>, &str); 7] = [
        (
            "mp3",
            b"ID3\x04\0\0\0\0\0\0rest of an mp3".to_vec(),
            "the audio is MP3, which is not encoded here",
        ),
        ("flac", b"fLaC\0\0\0\x22".to_vec(), "the audio is FLAC"),
        (
            "garbage",
            b"<html>502 Bad Gateway</html>".to_vec(),
            "an unknown format",
        ),
        ("nothing", Vec::new(), "an unknown format"),
        (
            "a truncated WAV",
            b"RIFF\xff\xff\xff\xffWAVEfmt \x10\0\0\0\x01\0".to_vec(),
            "ends inside its fmt chunk",
        ),
        ("a WAV of mu-law", wav_with_format(7), "format 0x0007"),
        ("ten minutes", ten_minutes, "lasts 600 s, over the 600 s"),
    ];
    for (name, bytes, want) in cases {
        let error = voice_note(bytes).map(|_| ()).unwrap_err().to_string();
        assert!(error.contains(want), "{name}: {error}");
    }
}

/// A 16-bit mono WAV whose `fmt ` chunk says audio format `format`.
fn wav_with_format(format: u16) -> Vec<u8> {
    let mut bytes = wav(8_000, 1, 16, &[0; 16], None);
    // RIFF header (12) and the LIST chunk (12), then `fmt ` and its length (8).
    bytes[32..34].copy_from_slice(&format.to_le_bytes());
    bytes
}

#[test]
fn ogg_opus_passes_as_it_is() {
    let ogg = voice_note(wav(48_000, 1, 16, &pcm16(&tone(48_000, 1, 0.1)), None))
        .unwrap()
        .0;
    let (again, from) = voice_note(ogg.clone()).unwrap();
    assert_eq!((again, from), (ogg, Format::OggOpus));
}

/// An Ogg page of one segment carrying `packet`.
fn page(packet: &[u8]) -> Vec<u8> {
    let mut page = b"OggS\0\x02".to_vec();
    page.extend_from_slice(&[0; 20]);
    page.push(1);
    page.push(u8::try_from(packet.len()).unwrap());
    page.extend_from_slice(packet);
    page
}

#[test]
fn formats_are_told_by_their_first_bytes() {
    let cases = [
        ("ogg opus", page(b"OpusHead\x01\x01"), Format::OggOpus),
        ("ogg vorbis", page(b"\x01vorbis"), Format::OtherOgg),
        ("a torn ogg page", b"OggS\0\x02".to_vec(), Format::OtherOgg),
        ("wav", wav(8_000, 1, 16, &[0; 4], None), Format::Wav),
        (
            "riff but not wave",
            b"RIFF\0\0\0\0AVI LIST".to_vec(),
            Format::Unknown,
        ),
        ("mp3 with id3", b"ID3\x04\0\0\0\0\0\0".to_vec(), Format::Mp3),
        ("mp3 frame sync", b"\xff\xfb\x90\x64".to_vec(), Format::Mp3),
        ("flac", b"fLaC\0\0\0\x22".to_vec(), Format::Flac),
        ("nothing", Vec::new(), Format::Unknown),
    ];
    for (name, bytes, want) in cases {
        assert_eq!(detect(&bytes), want, "{name}");
    }
}
