//! WAV (RIFF) audio read as it is, without copying: the `fmt ` chunk's layout and the `data`
//! chunk's bytes, and each frame's samples averaged to one mono sample on demand.
//!
//! Hostile input is bounded: every chunk length is checked against the bytes there are (a
//! `data` chunk claiming more than it holds, as streaming servers write `0xFFFFFFFF`, is read
//! as far as it goes, to the last whole frame), only integer PCM of 8, 16, 24 or 32 bits and
//! 32-bit float are read, at most [`MAX_CHANNELS`] channels at a rate in [`RATES`], and
//! walking the chunks stops after [`MAX_CHUNKS`].

use std::ops::RangeInclusive;

/// Sample rates read (Hz): telephone speech to studio audio.
pub(super) const RATES: RangeInclusive<u32> = 8_000..=192_000;

/// Most channels read (7.1 surround); they are averaged to mono.
const MAX_CHANNELS: u16 = 8;

/// Most chunks walked before the `data` chunk.
const MAX_CHUNKS: usize = 64;

/// `WAVE_FORMAT_PCM`, `WAVE_FORMAT_IEEE_FLOAT` and `WAVE_FORMAT_EXTENSIBLE` (whose sub-format
/// GUID starts with one of the first two).
const PCM: u16 = 1;
const FLOAT: u16 = 3;
const EXTENSIBLE: u16 = 0xFFFE;

/// How one sample is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sample {
    /// Unsigned 8-bit, 128 is silence.
    U8,
    /// Signed little-endian integers of 2, 3 or 4 bytes.
    Int(usize),
    /// Little-endian IEEE float of 4 bytes.
    F32,
}

impl Sample {
    fn bytes(self) -> usize {
        match self {
            Self::U8 => 1,
            Self::Int(bytes) => bytes,
            Self::F32 => 4,
        }
    }

    /// The sample at the start of `b`, in -1.0..=1.0 (a float's NaN or beyond is clamped).
    fn read(self, b: &[u8]) -> f32 {
        let value = match self {
            Self::U8 => (f32::from(b[0]) - 128.0) / 128.0,
            Self::Int(2) => f32::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0,
            Self::Int(3) => (i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as f32 / 8_388_608.0,
            Self::Int(_) => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32 / 2_147_483_648.0,
            Self::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        };
        if value.is_nan() {
            0.0
        } else {
            value.clamp(-1.0, 1.0)
        }
    }
}

/// A WAV file's audio: its layout and the whole frames of its `data` chunk.
#[derive(Debug)]
pub(super) struct Wav<'a> {
    pub(super) rate: u32,
    pub(super) channels: u16,
    pub(super) sample: Sample,
    data: &'a [u8],
}

impl Wav<'_> {
    /// Bytes of one frame (a sample of every channel).
    fn frame_bytes(&self) -> usize {
        usize::from(self.channels) * self.sample.bytes()
    }

    /// How many frames there are.
    pub(super) fn frames(&self) -> usize {
        self.data.len() / self.frame_bytes()
    }

    /// Frame `index`'s channels averaged, in -1.0..=1.0; silence past the end.
    pub(super) fn mono(&self, index: usize) -> f32 {
        let size = self.sample.bytes();
        let Some(frame) = index
            .checked_mul(self.frame_bytes())
            .and_then(|start| Some(start..start.checked_add(self.frame_bytes())?))
            .and_then(|range| self.data.get(range))
        else {
            return 0.0;
        };
        let sum: f32 = frame.chunks_exact(size).map(|b| self.sample.read(b)).sum();
        sum / f32::from(self.channels)
    }
}

/// Why bytes that start as a WAV file cannot be read as one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum WavError {
    #[error("the WAV file ends inside its {0}")]
    Truncated(&'static str),
    #[error("the WAV file has no `fmt ` chunk before its `data`")]
    NoFormat,
    #[error("the WAV file's audio is format {0:#06x}, not integer PCM or float")]
    Encoding(u16),
    #[error("the WAV file's layout is not read here: {channels} channels, {bits} bits, {rate} Hz")]
    Layout { channels: u16, bits: u16, rate: u32 },
    #[error("the WAV file has no audio")]
    Empty,
}

/// Reads `bytes` (starting `RIFF….WAVE`) as a WAV file.
pub(super) fn read(bytes: &[u8]) -> Result<Wav<'_>, WavError> {
    let mut rest = bytes.get(12..).ok_or(WavError::Truncated("RIFF header"))?;
    let mut layout = None;
    for _ in 0..MAX_CHUNKS {
        let header = rest.get(..8).ok_or(WavError::Truncated("chunk list"))?;
        let id = &header[..4];
        let claimed = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let body = &rest[8..];
        let len = usize::try_from(claimed)
            .unwrap_or(usize::MAX)
            .min(body.len());
        if id == b"data" {
            let (rate, channels, sample) = layout.ok_or(WavError::NoFormat)?;
            let frame = usize::from(channels) * Sample::bytes(sample);
            let whole = len - len % frame;
            if whole == 0 {
                return Err(WavError::Empty);
            }
            return Ok(Wav {
                rate,
                channels,
                sample,
                data: &body[..whole],
            });
        }
        if id == b"fmt " {
            let format = body
                .get(..len.min(26))
                .filter(|f| f.len() >= 16)
                .ok_or(WavError::Truncated("fmt chunk"))?;
            layout = Some(layout_of(format)?);
        }
        if usize::try_from(claimed).is_ok_and(|claimed| claimed > body.len()) {
            return Err(WavError::Truncated("chunk list"));
        }
        let padded = len + (len & 1);
        rest = body.get(padded..).unwrap_or_default();
    }
    Err(WavError::Truncated("chunk list"))
}

/// The rate, channels and sample type a `fmt ` chunk's body (16 bytes or more) says.
fn layout_of(format: &[u8]) -> Result<(u32, u16, Sample), WavError> {
    let u16_at = |at: usize| u16::from_le_bytes([format[at], format[at + 1]]);
    let mut encoding = u16_at(0);
    let channels = u16_at(2);
    let rate = u32::from_le_bytes([format[4], format[5], format[6], format[7]]);
    let bits = u16_at(14);
    if encoding == EXTENSIBLE {
        encoding = if format.len() >= 26 { u16_at(24) } else { 0 };
    }
    let sample = match (encoding, bits) {
        (PCM, 8) => Sample::U8,
        (PCM, 16 | 24 | 32) => Sample::Int(usize::from(bits / 8)),
        (FLOAT, 32) => Sample::F32,
        (PCM | FLOAT, _) => {
            return Err(WavError::Layout {
                channels,
                bits,
                rate,
            });
        }
        (other, _) => return Err(WavError::Encoding(other)),
    };
    if channels == 0 || channels > MAX_CHANNELS || !RATES.contains(&rate) {
        return Err(WavError::Layout {
            channels,
            bits,
            rate,
        });
    }
    Ok((rate, channels, sample))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A WAV file of `channels` × `bits`-bit integer PCM at `rate`, holding `data` as it is,
    /// whose `data` chunk claims `claimed` bytes (its real length when `None`).
    pub(crate) fn wav(
        rate: u32,
        channels: u16,
        bits: u16,
        data: &[u8],
        claimed: Option<u32>,
    ) -> Vec<u8> {
        let mut fmt = Vec::new();
        fmt.extend_from_slice(&PCM.to_le_bytes());
        fmt.extend_from_slice(&channels.to_le_bytes());
        fmt.extend_from_slice(&rate.to_le_bytes());
        let block = channels * bits / 8;
        fmt.extend_from_slice(&(rate * u32::from(block)).to_le_bytes());
        fmt.extend_from_slice(&block.to_le_bytes());
        fmt.extend_from_slice(&bits.to_le_bytes());
        let mut out = b"RIFF\0\0\0\0WAVE".to_vec();
        out.extend_from_slice(b"LIST\x04\0\0\0INFO");
        out.extend_from_slice(b"fmt \x10\0\0\0");
        out.extend_from_slice(&fmt);
        out.extend_from_slice(b"data");
        let len = claimed.unwrap_or(u32::try_from(data.len()).unwrap());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    /// 16-bit little-endian samples as bytes.
    pub(crate) fn pcm16(samples: &[i16]) -> Vec<u8> {
        samples.iter().flat_map(|s| s.to_le_bytes()).collect()
    }

    /// What a read gives: rate, channels, frames and the mono samples.
    type Read = (u32, u16, usize, Vec<f32>);

    #[test]
    fn layouts_and_hostile_headers() {
        let mono16 = wav(22_050, 1, 16, &pcm16(&[0, 16_384, -32_768]), None);
        let stereo16 = wav(44_100, 2, 16, &pcm16(&[32_767, -32_767, 16_384, 0]), None);
        let eight = wav(16_000, 1, 8, &[128, 255, 0], None);
        let claims_4_gb = wav(24_000, 1, 16, &pcm16(&[1, 2, 3]), Some(u32::MAX));
        let odd_tail = wav(24_000, 1, 16, &[0, 64, 7], None);
        let cases: [(&str, Vec<u8>, Result<Read, WavError>); 11] = [
            (
                "16-bit mono 22.05 kHz",
                mono16,
                Ok((22_050, 1, 3, vec![0.0, 0.5, -1.0])),
            ),
            (
                "16-bit stereo averaged",
                stereo16,
                Ok((44_100, 2, 2, vec![0.0, 0.25])),
            ),
            (
                "8-bit unsigned",
                eight,
                Ok((16_000, 1, 3, vec![0.0, 127.0 / 128.0, -1.0])),
            ),
            (
                "data claiming 4 GB is read as far as it goes",
                claims_4_gb,
                Ok((
                    24_000,
                    1,
                    3,
                    vec![1.0 / 32_768.0, 2.0 / 32_768.0, 3.0 / 32_768.0],
                )),
            ),
            (
                "a half frame at the end is dropped",
                odd_tail,
                Ok((24_000, 1, 1, vec![0.5])),
            ),
            (
                "cut inside the header",
                b"RIFF\0\0\0\0WA".to_vec(),
                Err(WavError::Truncated("RIFF header")),
            ),
            (
                "cut inside fmt",
                wav(24_000, 1, 16, &[], None)[..40].to_vec(),
                Err(WavError::Truncated("fmt chunk")),
            ),
            (
                "no audio",
                wav(24_000, 1, 16, &[], None),
                Err(WavError::Empty),
            ),
            (
                "12-bit",
                wav(24_000, 1, 12, &[0; 6], None),
                Err(WavError::Layout {
                    channels: 1,
                    bits: 12,
                    rate: 24_000,
                }),
            ),
            (
                "a rate of 4 Hz",
                wav(4, 1, 16, &[0; 6], None),
                Err(WavError::Layout {
                    channels: 1,
                    bits: 16,
                    rate: 4,
                }),
            ),
            (
                "garbage after RIFF",
                b"RIFF\0\0\0\0WAVEjunk\xff\xff\xff\x7fzz".to_vec(),
                Err(WavError::Truncated("chunk list")),
            ),
        ];
        for (name, bytes, want) in cases {
            let got = read(&bytes).map(|w| {
                let samples = (0..w.frames()).map(|i| w.mono(i)).collect();
                (w.rate, w.channels, w.frames(), samples)
            });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn a_frame_past_the_end_is_silence() {
        let bytes = wav(8_000, 1, 16, &pcm16(&[1000]), None);
        let wav = read(&bytes).unwrap();
        assert_eq!(wav.mono(1), 0.0);
        assert_eq!(wav.mono(usize::MAX), 0.0);
    }
}
