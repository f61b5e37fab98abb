//! Live frames: the longest prefix of an answer still streaming without half-written markup,
//! found in time linear in the answer (see [`settled`]).

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::markdown::markdown_options;

/// Cuts back before an unclosed opener at most this often; then the whole unfinished block
/// is held back.
const MAX_CUTS: usize = 4;

/// The longest prefix of `markdown` without half-written markup (see [`render_partial`](super::render_partial)).
pub(super) fn settled(markdown: &str) -> &str {
    let mut text = without_marker_line(markdown);
    for _ in 0..MAX_CUTS {
        match scan_last_block(text).opener {
            None => return text,
            Some(cut) => text = without_marker_line(&text[..cut]),
        }
    }
    &text[..scan_last_block(text).start]
}

/// A last line that is only block syntax so far is held back: a code fence still being typed
/// (its info string may be incomplete), or a bare marker (`-`, `1.`, `>`, `#`, `=`) whose text
/// has not come, which would show as an empty bullet or turn the line above into a heading.
fn without_marker_line(markdown: &str) -> &str {
    let line_start = markdown.rfind('\n').map_or(0, |i| i + 1);
    let line = markdown[line_start..].trim();
    let fence = |f: char| {
        (!line.is_empty() && line.chars().all(|c| c == f))
            || line.starts_with(&f.to_string().repeat(3))
    };
    let after_number = line.trim_start_matches(|c: char| c.is_ascii_digit());
    let marker = !line.is_empty()
        && (line.chars().all(|c| "-+*=#> ".contains(c))
            || (after_number.len() < line.len() && matches!(after_number, "." | ")")));
    if fence('`') || fence('~') || marker {
        &markdown[..line_start]
    } else {
        markdown
    }
}

/// Where the last block of a document starts, and the first place in it where inline markup
/// opens without being closed (only the last block can still be closed by text to come).
struct LastBlock {
    start: usize,
    opener: Option<usize>,
}

fn scan_last_block(markdown: &str) -> LastBlock {
    let mut start = 0;
    let mut in_code = false;
    let mut table_in_making = false;
    let mut texts = Vec::new();
    for (event, range) in Parser::new_ext(markdown, markdown_options()).into_offset_iter() {
        match event {
            Event::Start(tag) if is_block(&tag) => {
                start = range.start;
                texts.clear();
                in_code = matches!(tag, Tag::CodeBlock(_));
                // A header row waiting for its delimiter row would show as a raw `| a | b |`.
                table_in_making = matches!(tag, Tag::Paragraph)
                    && markdown[range.start..].trim_start().starts_with('|');
            }
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Text(_) if !in_code => texts.push(range),
            _ => {}
        }
    }
    let opener = if table_in_making {
        Some(start)
    } else {
        let mut openers = Openers::new(markdown);
        texts
            .into_iter()
            .find_map(|range| (range.start..range.end).find(|&i| openers.opens_unclosed(i)))
    };
    LastBlock { start, opener }
}

fn is_block(tag: &Tag<'_>) -> bool {
    !matches!(
        tag,
        Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. }
    )
}

/// Judges, position by position, whether literal text is markup still to be closed, in time
/// linear in the document when asked in document order (as [`scan_last_block`] does): what a
/// position needs to know about the text around it (the run of `\` just before it, the next
/// `]`, the last `)` and `]`) is carried from one position to the next instead of searched for
/// again, which made a live frame of a long run of backslashes take minutes.
struct Openers<'a> {
    markdown: &'a str,
    /// The run of `\` that ends just before byte `.0`.
    backslashes: (usize, usize),
    /// The first `]` at or after byte `.0`, searched from there.
    next_bracket: Option<(usize, Option<usize>)>,
    last_paren: Option<usize>,
    last_bracket: Option<usize>,
}

impl<'a> Openers<'a> {
    fn new(markdown: &'a str) -> Self {
        Self {
            markdown,
            backslashes: (0, 0),
            next_bracket: None,
            last_paren: markdown.rfind(')'),
            last_bracket: markdown.rfind(']'),
        }
    }

    /// Whether literal text at byte `i` is markup that text still to come could close: a
    /// backtick, an emphasis run that can open, a `[` not yet followed by a full link. Parsed
    /// Markdown leaves closed markup out of text events, so any such opener is unclosed.
    fn opens_unclosed(&mut self, i: usize) -> bool {
        let markdown = self.markdown;
        if !markdown.is_char_boundary(i) {
            return false;
        }
        if self.backslashes_before(i) % 2 == 1 {
            // Escaped: a literal character.
            return false;
        }
        let before = &markdown[..i];
        let rest = &markdown[i..];
        let Some(c) = rest.chars().next() else {
            return false;
        };
        match c {
            '`' => true,
            '*' | '_' | '~' => {
                let prev = before.chars().next_back();
                if prev == Some(c) {
                    // Only a whole run opens; its start was judged already (so each run is
                    // walked once).
                    return false;
                }
                let run = rest.len() - rest.trim_start_matches(c).len();
                let Some(next) = rest[run..].chars().next() else {
                    // A run at the very end: the text after it has not arrived yet.
                    return true;
                };
                // CommonMark's rule, with punctuation taken as anything not alphanumeric: a run
                // opens when it is not followed by a space, and, when followed by punctuation,
                // stands after a space or punctuation. `_` does not open inside a word.
                let left_flanking = !next.is_whitespace()
                    && (next.is_alphanumeric() || prev.is_none_or(|p| !p.is_alphanumeric()));
                left_flanking && (c != '_' || !prev.is_some_and(char::is_alphanumeric))
            }
            '[' => {
                let Some(close) = self.next_bracket(i + 1) else {
                    return true;
                };
                let later = |last: Option<usize>| last.is_some_and(|at| at > close + 1);
                match markdown[close + 1..].chars().next() {
                    None => true,
                    Some('(') => !later(self.last_paren),
                    Some('[') => !later(self.last_bracket),
                    Some(_) => false,
                }
            }
            '!' => rest[1..].starts_with('[') && self.opens_unclosed(i + 1),
            _ => false,
        }
    }

    /// How many `\` stand right before byte `i`.
    fn backslashes_before(&mut self, i: usize) -> usize {
        let (at, run) = self.backslashes;
        let run = if at <= i {
            self.markdown.as_bytes()[at..i]
                .iter()
                .fold(run, |run, &b| if b == b'\\' { run + 1 } else { 0 })
        } else {
            let before = &self.markdown[..i];
            before.len() - before.trim_end_matches('\\').len()
        };
        self.backslashes = (i, run);
        run
    }

    /// The first `]` at or after byte `from`.
    fn next_bracket(&mut self, from: usize) -> Option<usize> {
        if let Some((searched, found)) = self.next_bracket
            && searched <= from
            && found.is_none_or(|at| at >= from)
        {
            return found;
        }
        let found = self.markdown[from..].find(']').map(|at| from + at);
        self.next_bracket = Some((from, found));
        found
    }
}
