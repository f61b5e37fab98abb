//! Sizes as a reader sees them, in one place: the two units the bot counts bytes in, and how a
//! count of bytes (or of anything, in groups of three digits) is written.
//!
//! Telegram states its caps in decimal megabytes (a bot downloads files up to 20 MB, 20,000,000
//! bytes), so a file measured against such a cap is told in those. The store on disk, its
//! backups and the `_mb` settings count in binary ones (MiB), written "MB" as `du -h` does.
//!
//! ```
//! # use heurist::sizes::{Unit, megabytes, size};
//! assert_eq!(size(12_345_678, Unit::Decimal), "12.3 MB");
//! assert_eq!(size(5_000, Unit::Decimal), "5 kB");
//! assert_eq!(size(812 << 10, Unit::Binary), "812 KB");
//! assert_eq!(megabytes(64 << 20, Unit::Binary), "64 MB");
//! ```

/// How many bytes make a kilobyte, and a megabyte (a thousand of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// 1 kB is 1,000 bytes: Telegram's caps, and the files measured against them.
    Decimal,
    /// 1 KB is 1,024 bytes (a KiB; 1 MB a MiB): the store on disk, backups, the `_mb` settings.
    Binary,
}

impl Unit {
    /// Bytes in one kilobyte.
    fn kilobyte(self) -> u64 {
        match self {
            Self::Decimal => 1_000,
            Self::Binary => 1_024,
        }
    }

    /// Bytes in one megabyte.
    fn megabyte(self) -> u64 {
        self.kilobyte() * self.kilobyte()
    }

    /// How a kilobyte is written: "kB" (SI) or "KB" (binary, as JEDEC writes it).
    fn kilobyte_symbol(self) -> &'static str {
        match self {
            Self::Decimal => "kB",
            Self::Binary => "KB",
        }
    }
}

/// `bytes` for a reader: in kilobytes below a megabyte, rounded up so a file is never "0 kB"
/// ("5 kB", "812 KB"), else in megabytes with one decimal ("12.3 MB"). For a file's size and
/// the cap it is held to.
pub fn size(bytes: u64, unit: Unit) -> String {
    if bytes < unit.megabyte() {
        format!(
            "{} {}",
            bytes.div_ceil(unit.kilobyte()),
            unit.kilobyte_symbol()
        )
    } else {
        format!("{:.1} MB", bytes as f64 / unit.megabyte() as f64)
    }
}

/// `bytes` in megabytes whatever their size: one decimal below 10 MB ("0.4 MB", "2.0 MB"),
/// whole above, in groups of three digits ("64 MB", "1,038 MB"). For a store that grows
/// from nothing to gigabytes, told next to a threshold in MB.
pub fn megabytes(bytes: u64, unit: Unit) -> String {
    let mb = bytes as f64 / unit.megabyte() as f64;
    if mb < 10.0 {
        format!("{mb:.1} MB")
    } else {
        format!("{} MB", thousands(mb.round() as u64))
    }
}

/// `n` with groups of three digits: 1234567 → "1,234,567".
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_told_in_their_unit() {
        struct Case {
            name: &'static str,
            told: String,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "a decimal file over a megabyte",
                told: size(12_345_678, Unit::Decimal),
                want: "12.3 MB",
            },
            Case {
                name: "Telegram's cap",
                told: size(20_000_000, Unit::Decimal),
                want: "20.0 MB",
            },
            Case {
                name: "a decimal file under a megabyte, rounded up",
                told: size(4_001, Unit::Decimal),
                want: "5 kB",
            },
            Case {
                name: "a byte is a kilobyte, not nothing",
                told: size(1, Unit::Decimal),
                want: "1 kB",
            },
            Case {
                name: "a binary file under a megabyte",
                told: size(812 << 10, Unit::Binary),
                want: "812 KB",
            },
            Case {
                name: "a binary megabyte is 1,048,576 bytes",
                told: size(1_000_000, Unit::Binary),
                want: "977 KB",
            },
            Case {
                name: "a binary file over a megabyte",
                told: size(1_258_291, Unit::Binary),
                want: "1.2 MB",
            },
        ];
        for case in cases {
            assert_eq!(case.told, case.want, "{}", case.name);
        }
    }

    #[test]
    fn megabytes_have_a_decimal_only_below_ten() {
        let cases = [
            ("empty", 0, "0.0 MB"),
            ("half", 1 << 19, "0.5 MB"),
            ("two", 2 << 20, "2.0 MB"),
            ("the shipped compaction minimum", 64 << 20, "64 MB"),
            ("over a gigabyte", 1_038 << 20, "1,038 MB"),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(megabytes(bytes, Unit::Binary), want, "{name}");
        }
        assert_eq!(megabytes(2_500_000, Unit::Decimal), "2.5 MB");
    }

    #[test]
    fn thousands_are_grouped() {
        let cases = [
            ("zero", 0, "0"),
            ("three digits", 999, "999"),
            ("four digits", 1000, "1,000"),
            ("seven digits", 1234567, "1,234,567"),
            ("six digits", 123456, "123,456"),
        ];
        for (name, n, want) in cases {
            assert_eq!(thousands(n), want, "{name}");
        }
    }
}
