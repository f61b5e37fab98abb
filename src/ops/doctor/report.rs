//! The doctor's report: a [`Line`] per thing checked, with its [`Status`] and its fix, and
//! the [`Report`] of them all, rendered for the terminal with secrets removed.

use crate::texts::ops as texts;

/// How one line came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Optional, and not working: the bot runs without it.
    Warn,
    /// Needed, and not working: the bot cannot do its job.
    Fail,
    /// Not checked (not configured, or what it needs failed above).
    Skipped,
}

impl Status {
    fn mark(self) -> &'static str {
        match self {
            Status::Ok => "✓",
            Status::Warn => "!",
            Status::Fail => "✗",
            Status::Skipped => "–",
        }
    }
}

/// One line of the report: what was checked, what was found, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub status: Status,
    pub what: String,
    pub found: String,
    pub fix: Option<String>,
}

impl Line {
    pub(super) fn ok(what: impl Into<String>, found: impl Into<String>) -> Self {
        Self::new(Status::Ok, what, found, None)
    }

    pub(super) fn skipped(what: impl Into<String>, found: impl Into<String>) -> Self {
        Self::new(Status::Skipped, what, found, None)
    }

    pub(super) fn fail(what: impl Into<String>, found: impl Into<String>, fix: &str) -> Self {
        Self::new(Status::Fail, what, found, Some(fix.to_string()))
    }

    pub(super) fn warn(what: impl Into<String>, found: impl Into<String>, fix: &str) -> Self {
        Self::new(Status::Warn, what, found, Some(fix.to_string()))
    }

    fn new(
        status: Status,
        what: impl Into<String>,
        found: impl Into<String>,
        fix: Option<String>,
    ) -> Self {
        Self {
            status,
            what: what.into(),
            found: found.into(),
            fix,
        }
    }
}

/// Everything the doctor found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub lines: Vec<Line>,
}

impl Report {
    /// Whether everything needed works (warnings allowed): the exit status is 0 then.
    pub fn healthy(&self) -> bool {
        !self.lines.iter().any(|l| l.status == Status::Fail)
    }

    /// The line about `what`, if there is one (tests look lines up by it).
    pub fn line(&self, what: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.what == what)
    }

    /// The report as printed: a line each, the fix indented under it, a summary last; every
    /// one of `secrets` replaced.
    pub fn render(&self, secrets: &[String]) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.push_str(&format!(
                "{} {}: {}\n",
                line.status.mark(),
                line.what,
                line.found
            ));
            if let Some(fix) = &line.fix {
                out.push_str(&format!("    fix: {fix}\n"));
            }
        }
        let count = |status| self.lines.iter().filter(|l| l.status == status).count();
        out.push_str(&texts::summary(count(Status::Fail), count(Status::Warn)));
        out.push('\n');
        crate::logging::redact(&out, secrets)
    }

    /// The report for a configuration that could not be loaded.
    pub fn unloadable(error: &anyhow::Error) -> Self {
        Self {
            lines: vec![Line::fail(
                texts::CONFIG,
                format!("{error:#}"),
                texts::CONFIG_FIX,
            )],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_marks_fixes_and_redacts() {
        let report = Report {
            lines: vec![
                Line::ok("Telegram token", "the bot is @b (id 1)"),
                Line::warn("SearXNG", "refuses JSON", "enable json"),
                Line::fail(
                    "LLM endpoint",
                    "cannot reach http://k:SECRETKEY@h",
                    "start it",
                ),
                Line::skipped("model m", "not checked"),
            ],
        };
        let text = report.render(&["SECRETKEY".to_string()]);
        assert_eq!(
            text,
            "✓ Telegram token: the bot is @b (id 1)\n\
             ! SearXNG: refuses JSON\n    fix: enable json\n\
             ✗ LLM endpoint: cannot reach http://k:[redacted]@h\n    fix: start it\n\
             – model m: not checked\n\
             1 thing(s) to fix before the bot can work.\n"
        );
        assert!(!report.healthy());
        let warned = Report {
            lines: report.lines[..2].to_vec(),
        };
        assert!(warned.healthy(), "a warning alone is healthy");
    }
}
