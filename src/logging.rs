//! Logs on stderr, with secrets removed.
//!
//! Dependencies log errors we do not control (teloxide logs reqwest errors whose URLs contain
//! the bot token), so redaction happens where every log line is written, not at each call site.

use std::io::{self, Write};
use std::sync::Arc;

use tracing_subscriber::EnvFilter;

/// Secrets shorter than this are replaced only where they stand as a word of their own: a
/// short key such as `k` must not turn `key provided` into `[redacted]ey provided`.
const WHOLE_WORD_BELOW: usize = 8;

/// Replaces every secret in `text` with `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(text.to_string(), |text, secret| {
            if secret.chars().count() >= WHOLE_WORD_BELOW {
                text.replace(secret.as_str(), "[redacted]")
            } else {
                replace_words(&text, secret)
            }
        })
}

/// Replaces `secret` where neither neighbour is a letter or digit.
fn replace_words(text: &str, secret: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(secret) {
        let (before, after) = (&rest[..at], &rest[at + secret.len()..]);
        out.push_str(before);
        let alone = !word(out.chars().next_back()) && !word(after.chars().next());
        out.push_str(if alone { "[redacted]" } else { secret });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Installs the global subscriber: `RUST_LOG` filter (default `info`), stderr, secrets removed.
pub fn init(secrets: Vec<String>) {
    let secrets: Arc<[String]> = secrets.into();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(move || Redacting {
            secrets: secrets.clone(),
        })
        .init();
}

/// A stderr writer that redacts. The fmt layer writes one whole event per `write` call, so a
/// secret is never split across calls.
struct Redacting {
    secrets: Arc<[String]>,
}

impl Write for Redacting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let mut stderr = io::stderr().lock();
        if self
            .secrets
            .iter()
            .any(|s| !s.is_empty() && text.contains(s.as_str()))
        {
            stderr.write_all(redact(&text, &self.secrets).as_bytes())?;
        } else {
            stderr.write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_is_replaced() {
        let secrets = vec![
            "123:SECRETTOKEN".to_string(),
            "SECRETTOKEN".to_string(),
            "sk-KEY12345".to_string(),
        ];
        let line =
            "GET http://x/bot123:SECRETTOKEN/getMe failed; key sk-KEY12345; half SECRETTOKEN";
        let clean = redact(line, &secrets);
        assert!(
            !clean.contains("SECRETTOKEN") && !clean.contains("sk-KEY12345"),
            "{clean}"
        );
        assert_eq!(clean.matches("[redacted]").count(), 3);
    }

    #[test]
    fn short_secrets_only_as_whole_words() {
        struct Case {
            name: &'static str,
            secret: &'static str,
            line: &'static str,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "inside a word stays",
                secret: "k",
                line: "no key provided",
                want: "no key provided",
            },
            Case {
                name: "alone is replaced",
                secret: "abc1",
                line: "key=abc1 sent",
                want: "key=[redacted] sent",
            },
            Case {
                name: "at both ends",
                secret: "abc1",
                line: "abc1 and abc1",
                want: "[redacted] and [redacted]",
            },
            Case {
                name: "glued to a digit stays",
                secret: "abc1",
                line: "abc12 xabc1",
                want: "abc12 xabc1",
            },
            Case {
                name: "long secret inside a word is replaced",
                secret: "sk-LONGKEY99",
                line: "bearersk-LONGKEY99x",
                want: "bearer[redacted]x",
            },
        ];
        for case in cases {
            let got = redact(case.line, &[case.secret.to_string()]);
            assert_eq!(got, case.want, "{}", case.name);
        }
    }
}
