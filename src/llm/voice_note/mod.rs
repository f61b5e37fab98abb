//! What a speech endpoint answered, made into what Telegram plays as a voice note: Ogg Opus.
//!
//! Ogg Opus (what `response_format: "opus"` asks for) passes as it is. WAV, which every
//! OpenAI-compatible speech server can give and some give whatever was asked, is read
//! ([`wav`]), averaged to mono, brought to a rate Opus takes when it is not one
//! ([`resample`]: 22.05 and 44.1 kHz to 48 kHz) and encoded by libopus into an Ogg stream
//! ([`ogg_opus`]). Other formats (MP3, FLAC, Ogg Vorbis, …) are named and refused: the text
//! answer stands.
//!
//! Bounded: the bytes are capped by the caller (the synthesis endpoint's read limit), the
//! audio at [`MAX_SECONDS`] (far past what `max_spoken_chars` makes), and no copy of the
//! decoded audio is made: samples are read from the WAV bytes as the encoder asks for them.
//! The work is CPU-bound: libopus's encoding, and where the rate is not one Opus takes, 32
//! multiplications an output sample going up (the resampler keeps its weights per position,
//! no sine or cosine a sample); callers run it on a blocking thread.
//!
//! ```
//! # use heurist::llm::voice_note::{detect, Format};
//! assert_eq!(detect(b"RIFF\x24\0\0\0WAVEfmt "), Format::Wav);
//! assert_eq!(detect(b"ID3\x04\0\0\0\0\0\0"), Format::Mp3);
//! ```

mod ogg_opus;
mod resample;
mod wav;

pub(crate) use ogg_opus::EncodeError;
use ogg_opus::OPUS_RATES;
use resample::Resampler;
pub(crate) use wav::WavError;

/// Longest audio encoded: `max_spoken_chars` of a few thousand is minutes of speech.
pub const MAX_SECONDS: u32 = 600;

/// The formats told apart by their first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OggOpus,
    Wav,
    Mp3,
    Flac,
    /// An Ogg stream of another codec (Vorbis, most likely).
    OtherOgg,
    Unknown,
}

impl Format {
    /// The name used in errors and the doctor's report.
    pub fn name(self) -> &'static str {
        match self {
            Self::OggOpus => "Ogg Opus",
            Self::Wav => "WAV",
            Self::Mp3 => "MP3",
            Self::Flac => "FLAC",
            Self::OtherOgg => "Ogg (not Opus)",
            Self::Unknown => "an unknown format",
        }
    }
}

/// The format `bytes` start as.
pub fn detect(bytes: &[u8]) -> Format {
    if is_ogg_opus(bytes) {
        Format::OggOpus
    } else if bytes.starts_with(b"OggS") {
        Format::OtherOgg
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WAVE" {
        Format::Wav
    } else if bytes.starts_with(b"fLaC") {
        Format::Flac
    } else if bytes.starts_with(b"ID3")
        || bytes.first() == Some(&0xFF) && bytes.get(1).is_some_and(|b| b & 0xE0 == 0xE0)
    {
        Format::Mp3
    } else {
        Format::Unknown
    }
}

/// Whether `bytes` start as an Ogg Opus file does: an `OggS` page (version 0) whose body
/// starts with the `OpusHead` identification header (RFC 7845).
pub(crate) fn is_ogg_opus(bytes: &[u8]) -> bool {
    let Some(header) = bytes.get(..27) else {
        return false;
    };
    if &header[..4] != b"OggS" || header[4] != 0 {
        return false;
    }
    let body = 27 + usize::from(header[26]);
    bytes
        .get(body..)
        .is_some_and(|rest| rest.starts_with(b"OpusHead"))
}

/// Why audio could not be made a voice note.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VoiceNoteError {
    #[error("the audio is {}, which is not encoded here (Ogg Opus and WAV are)", .0.name())]
    Unsupported(Format),
    #[error(transparent)]
    Wav(#[from] WavError),
    #[error("the audio lasts {0} s, over the {MAX_SECONDS} s a spoken reply may")]
    TooLong(u64),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// `bytes` as an Ogg Opus voice note, and the format they came in.
pub(crate) fn voice_note(bytes: Vec<u8>) -> Result<(Vec<u8>, Format), VoiceNoteError> {
    match detect(&bytes) {
        Format::OggOpus => Ok((bytes, Format::OggOpus)),
        Format::Wav => Ok((from_wav(&bytes)?, Format::Wav)),
        other => Err(VoiceNoteError::Unsupported(other)),
    }
}

/// A WAV file encoded as Ogg Opus, at its own rate when Opus takes it, else at 48 kHz.
fn from_wav(bytes: &[u8]) -> Result<Vec<u8>, VoiceNoteError> {
    let wav = wav::read(bytes)?;
    let frames = wav.frames();
    let seconds = frames as u64 / u64::from(wav.rate);
    if seconds >= u64::from(MAX_SECONDS) {
        return Err(VoiceNoteError::TooLong(seconds));
    }
    let encoded = if OPUS_RATES.contains(&wav.rate) {
        ogg_opus::encode(wav.rate, frames, wav.rate, |i| wav.mono(i))?
    } else {
        let to = 48_000;
        let resampler = Resampler::new(wav.rate, to);
        let len = resampler.len(frames);
        ogg_opus::encode(to, len, wav.rate, |i| {
            resampler.at(i, frames, |k| wav.mono(k))
        })?
    };
    Ok(encoded)
}

#[cfg(test)]
mod tests;
