//! Sample-rate conversion for a rate Opus does not take (22.05 and 44.1 kHz, Piper's and
//! CD's): band-limited interpolation, each output sample a Hann-windowed sinc over
//! [`HALF_TAPS`] input samples either side, its cut-off at the lower rate's Nyquist frequency
//! (so nothing above it folds back when going down). Samples are asked for one at a time
//! through a function, so no copy of the input is made. Where output samples fall on at most
//! [`MAX_PHASES`] positions between input samples (22.05 → 48 kHz: 320), the weights of each
//! position are worked out once, and an output sample costs `2 × HALF_TAPS × max(1, from/to)`
//! multiplications; other rates work them out for every sample (a sine and a cosine a tap).

use std::f64::consts::PI;

/// Input samples weighed on each side of an output sample, at the lower rate: enough for
/// speech (the stop band starts about 1/16 of the band below Nyquist).
const HALF_TAPS: f64 = 16.0;

/// Positions between input samples the weights are kept for, at most (a table of this many
/// × 2 × [`HALF_TAPS`] × max(1, from/to) weights: 32 kB a thousand positions going up).
const MAX_PHASES: u64 = 4_096;

/// A conversion from one rate to another.
pub(super) struct Resampler {
    from: u64,
    to: u64,
    /// Input samples per output sample.
    step: f64,
    /// The cut-off as a fraction of the input's Nyquist frequency (1 when going up).
    cutoff: f64,
    /// How far the window reaches, in input samples.
    reach: f64,
    /// Input samples either side of an output sample's position that may weigh.
    span: i64,
    /// The weights, by position: output sample `i` is at position `i % phases`, and its
    /// weights apply to input samples `floor(i × from / to) - span ..= + span + 1`. Empty
    /// where the rates make too many positions.
    table: Vec<Vec<f64>>,
}

impl Resampler {
    pub(super) fn new(from: u32, to: u32) -> Self {
        let step = f64::from(from) / f64::from(to);
        let cutoff = (1.0 / step).min(1.0);
        let reach = HALF_TAPS / cutoff;
        let (from, to) = (u64::from(from), u64::from(to.max(1)));
        let mut resampler = Self {
            from,
            to,
            step,
            cutoff,
            reach,
            span: reach.ceil() as i64,
            table: Vec::new(),
        };
        let phases = to / gcd(from, to);
        if phases <= MAX_PHASES {
            resampler.table = (0..phases)
                .map(|phase| {
                    let fraction = (phase * from % to) as f64 / to as f64;
                    (-resampler.span..=resampler.span + 1)
                        .map(|j| resampler.weight(fraction - j as f64))
                        .collect()
                })
                .collect();
        }
        resampler
    }

    /// How many output samples `frames` input samples make.
    pub(super) fn len(&self, frames: usize) -> usize {
        (frames as f64 / self.step).round() as usize
    }

    /// Output sample `index` of the `frames` input samples `input` gives (silence outside).
    pub(super) fn at(&self, index: usize, frames: usize, input: impl Fn(usize) -> f32) -> f32 {
        if self.table.is_empty() {
            return self.computed(index, frames, input);
        }
        let weights = &self.table[index % self.table.len()];
        let below = (index as u128 * u128::from(self.from) / u128::from(self.to)) as i64;
        let mut sum = 0.0;
        for (j, weight) in (-self.span..).zip(weights) {
            let Ok(k) = usize::try_from(below + j) else {
                continue;
            };
            if k >= frames {
                break;
            }
            sum += f64::from(input(k)) * weight;
        }
        sum as f32
    }

    /// [`Self::at`], each weight worked out for the sample.
    fn computed(&self, index: usize, frames: usize, input: impl Fn(usize) -> f32) -> f32 {
        let t = index as f64 * self.step;
        let first = (t - self.reach).ceil().max(0.0) as usize;
        let last = ((t + self.reach).floor() as usize).min(frames.saturating_sub(1));
        let mut sum = 0.0;
        for k in first..=last {
            sum += f64::from(input(k)) * self.weight(t - k as f64);
        }
        sum as f32
    }

    /// The weight of an input sample `x` input samples before the output sample's position.
    fn weight(&self, x: f64) -> f64 {
        if x.abs() >= self.reach {
            return 0.0;
        }
        let window = 0.5 * (1.0 + (PI * x / self.reach).cos());
        self.cutoff * sinc(self.cutoff * x) * window
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
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

    /// The table gives what working each weight out gives, at every position, edges included.
    #[test]
    fn the_kept_weights_give_what_working_them_out_gives() {
        for (from, to) in [
            (22_050, 48_000),
            (44_100, 48_000),
            (96_000, 48_000),
            (8_000, 48_000),
        ] {
            let resampler = Resampler::new(from, to);
            assert!(!resampler.table.is_empty(), "{from} → {to}: kept");
            let input = tone(440.0, from, 2_000);
            let len = resampler.len(input.len());
            for i in 0..len {
                let kept = resampler.at(i, input.len(), |k| input[k]);
                let worked = resampler.computed(i, input.len(), |k| input[k]);
                assert!(
                    (kept - worked).abs() < 1e-5,
                    "{from} → {to}, sample {i}: {kept} {worked}"
                );
            }
        }
        assert!(
            Resampler::new(22_051, 48_000).table.is_empty(),
            "48,000 positions"
        );
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
