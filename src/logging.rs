//! Logs on stderr, with secrets removed.
//!
//! Dependencies log errors we do not control (teloxide logs reqwest errors whose URLs contain
//! the bot token), so redaction happens where every log line is written, not at each call site.

use std::io::{self, Write};
use std::sync::Arc;

use tracing_subscriber::EnvFilter;

/// Replaces every secret in `text` with `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(text.to_string(), |text, secret| {
            text.replace(secret.as_str(), "[redacted]")
        })
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
        if self.secrets.iter().any(|s| text.contains(s.as_str())) {
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
}
