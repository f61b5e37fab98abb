//! Sample-rate conversion for a rate Opus does not take (22.05 and 44.1 kHz, Piper's and
//! CD's): band-limited interpolation, each output sample a Hann-windowed sinc over
//! [`HALF_TAPS`] input samples either side, its cut-off at the lower rate's Nyquist frequency
//! (so nothing above it folds back when going down). Samples are asked for one at a time
//! through a function, so no copy of the input is made; the cost is
//! `2 × HALF_TAPS × max(1, from/to)` multiplications an output sample.

use std::f64::consts::PI;

/// Input samples weighed on each side of an output sample, at the lower rate: enough for
/// speech (the stop band starts about 1/16 of the band below Nyquist).
const HALF_TAPS: f64 = 16.0;

/// A conversion from one rate to another.
pub(super) struct Resampler {
    /// Input samples per output sample.
    step: f64,
    /// The cut-off as a fraction of the input's Nyquist frequency (1 when going up).
    cutoff: f64,
    /// How far the window reaches, in input samples.
    reach: f64,
}

impl Resampler {
    pub(super) fn new(from: u32, to: u32) -> Self {
        let step = f64::from(from) / f64::from(to);
        let cutoff = (1.0 / step).min(1.0);
        Self {
            step,
            cutoff,
            reach: HALF_TAPS / cutoff,
        }
    }

    /// How many output samples `frames` input samples make.
    pub(super) fn len(&self, frames: usize) -> usize {
        (frames as f64 / self.step).round() as usize
    }

    /// Output sample `index` of the `frames` input samples `input` gives (silence outside).
    pub(super) fn at(&self, index: usize, frames: usize, input: impl Fn(usize) -> f32) -> f32 {
        let t = index as f64 * self.step;
        let first = (t - self.reach).ceil().max(0.0) as usize;
        let last = ((t + self.reach).floor() as usize).min(frames.saturating_sub(1));
        let mut sum = 0.0;
        for k in first..=last {
            let x = t - k as f64;
            if x.abs() >= self.reach {
                continue;
            }
            let window = 0.5 * (1.0 + (PI * x / self.reach).cos());
            sum += f64::from(input(k)) * self.cutoff * sinc(self.cutoff * x) * window;
        }
        sum as f32
    }
}

/// sin(πx)/(πx), 1 at 0.
fn sinc(x: f64) -> f64 {
    if x.abs() < 1e-9 {
        1.0
    } else {
        (PI * x).sin() / (PI * x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root-mean-square of `samples`.
    fn rms(samples: &[f32]) -> f32 {
        (samples.iter().map(|s| s * s).sum::<f32>() / samples.len() as f32).sqrt()
    }

    /// A tone of `hz` at `rate`, `frames` long, amplitude 0.5.
    fn tone(hz: f64, rate: u32, frames: usize) -> Vec<f32> {
        (0..frames)
            .map(|i| (0.5 * (2.0 * PI * hz * i as f64 / f64::from(rate)).sin()) as f32)
            .collect()
    }

    #[test]
    fn tones_pass_and_what_cannot_be_kept_is_cut() {
        let cases = [
            ("a 440 Hz tone, 22.05 → 48 kHz", 440.0, 22_050, 48_000, 0.5),
            ("a 3 kHz tone, 44.1 → 48 kHz", 3_000.0, 44_100, 48_000, 0.5),
            ("a 1 kHz tone, 96 → 48 kHz", 1_000.0, 96_000, 48_000, 0.5),
            (
                "a 30 kHz tone cannot be kept at 48 kHz: cut, not folded",
                30_000.0,
                96_000,
                48_000,
                0.0,
            ),
        ];
        for (name, hz, from, to, amplitude) in cases {
            let input = tone(hz, from, from as usize / 10);
            let resampler = Resampler::new(from, to);
            let len = resampler.len(input.len());
            assert_eq!(len, to as usize / 10, "{name}: length");
            let output: Vec<f32> = (0..len)
                .map(|i| resampler.at(i, input.len(), |k| input[k]))
                .collect();
            // Away from the edges, where the window runs out of input.
            let middle = &output[len / 4..len * 3 / 4];
            let want = amplitude / 2f32.sqrt();
            assert!(
                (rms(middle) - want).abs() < 0.02,
                "{name}: rms {} not {want}",
                rms(middle)
            );
            if amplitude > 0.0 {
                let expected = tone(hz, to, len);
                let error: Vec<f32> = middle
                    .iter()
                    .zip(&expected[len / 4..])
                    .map(|(a, b)| a - b)
                    .collect();
                assert!(
                    rms(&error) < 0.01,
                    "{name}: off the tone by {}",
                    rms(&error)
                );
            }
        }
    }
}
