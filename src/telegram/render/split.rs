//! Splitting: tokens packed into HTML parts of at most a limit of UTF-16 units, each cut at the
//! best break available, with the tags open at a cut closed and reopened in the next part.

use super::html::{Tok, push_escaped, utf16_len};

#[derive(Clone)]
struct Break {
    /// Bytes of the part's HTML before the break.
    html_len: usize,
    /// Tags open at the break.
    stack: Vec<(String, &'static str)>,
    /// Where the next part continues: token index and byte offset inside a text token.
    resume: (usize, usize),
    /// 3 paragraph, 2 line, 1 space.
    quality: u8,
    /// UTF-16 length of the part at the break.
    units: usize,
}

/// The closing tags of `stack`, innermost first.
fn closing(stack: &[(String, &'static str)]) -> String {
    stack.iter().rev().map(|(_, close)| *close).collect()
}

/// Packs tokens into parts of at most `limit` UTF-16 units, cutting at the best break.
pub(super) fn split(toks: &[Tok], limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut pos = (0usize, 0usize);
    let mut stack: Vec<(String, &'static str)> = Vec::new();
    while pos.0 < toks.len() {
        // Deeply nested tags that cannot even be reopened within the limit are dropped.
        if stack
            .iter()
            .map(|(o, c)| utf16_len(o) + utf16_len(c))
            .sum::<usize>()
            * 2
            > limit
        {
            stack.clear();
        }
        let part_start = pos;
        let mut part = Part::new(toks, limit, stack, pos);
        if part.fill() {
            part.cut();
        }
        let html = part.html;
        (stack, pos) = (part.stack, part.pos);
        if pos == part_start {
            // Not even one character fitted behind the reopened tags: continue without them.
            stack.clear();
            continue;
        }
        parts.push(closed(html, &stack));
    }
    parts
}

/// A part's HTML with the tags still open at its end closed. Tags opened just before the cut
/// hold nothing in this part: they are left out (the next part reopens them).
fn closed(mut html: String, stack: &[(String, &'static str)]) -> String {
    let mut kept = stack.len();
    while kept > 0 && html.ends_with(stack[kept - 1].0.as_str()) {
        html.truncate(html.len() - stack[kept - 1].0.len());
        kept -= 1;
    }
    html.push_str(&closing(&stack[..kept]));
    html
}

/// One part being filled by [`split`]: its HTML so far (the tags open at its start reopened),
/// the tags open now, where in the tokens it is, its size, and the places it may end.
struct Part<'a> {
    toks: &'a [Tok],
    limit: usize,
    html: String,
    stack: Vec<(String, &'static str)>,
    /// Token index and byte offset inside a text token.
    pos: (usize, usize),
    /// UTF-16 units of the reopened tags, of the part so far, and of the closing tags it needs.
    start_units: usize,
    units: usize,
    close_units: usize,
    breaks: Vec<Break>,
}

impl<'a> Part<'a> {
    fn new(
        toks: &'a [Tok],
        limit: usize,
        stack: Vec<(String, &'static str)>,
        pos: (usize, usize),
    ) -> Self {
        let html: String = stack.iter().map(|(open, _)| open.as_str()).collect();
        let start_units = utf16_len(&html);
        let close_units = utf16_len(&closing(&stack));
        Self {
            toks,
            limit,
            html,
            stack,
            pos,
            start_units,
            units: start_units,
            close_units,
            breaks: Vec::new(),
        }
    }

    /// Takes tokens until they end or the part is full; `true` if it is full.
    fn fill(&mut self) -> bool {
        let toks = self.toks;
        while self.pos.0 < toks.len() {
            let full = match &toks[self.pos.0] {
                Tok::Open { open, close } => self.open(open, close),
                Tok::Close => {
                    self.close();
                    false
                }
                Tok::Newline => self.newline(),
                Tok::Text(text) => self.text(text),
            };
            if full {
                return true;
            }
        }
        false
    }

    /// An opening tag, unless it and its closing tag no longer fit behind some content.
    fn open(&mut self, open: &str, close: &'static str) -> bool {
        let need = utf16_len(open) + utf16_len(close);
        if self.units + need + self.close_units + 1 > self.limit && self.units > self.start_units {
            return true;
        }
        self.html.push_str(open);
        self.units += utf16_len(open);
        self.close_units += utf16_len(close);
        self.stack.push((open.to_string(), close));
        self.pos = (self.pos.0 + 1, 0);
        false
    }

    /// A closing tag; a tag reopened at the part's start only to close is left out.
    fn close(&mut self) {
        if let Some((open, close)) = self.stack.pop() {
            if self.html.ends_with(open.as_str()) {
                self.html.truncate(self.html.len() - open.len());
                self.units -= utf16_len(&open);
            } else {
                self.html.push_str(close);
                self.units += utf16_len(close);
            }
            self.close_units -= utf16_len(close);
        }
        self.pos = (self.pos.0 + 1, 0);
    }

    /// A line break: a place to end (better after a blank line), then the break if it fits.
    fn newline(&mut self) -> bool {
        let mut after = self.pos.0;
        while self.toks.get(after) == Some(&Tok::Newline) {
            after += 1;
        }
        let quality = if after - self.pos.0 > 1 { 3 } else { 2 };
        self.mark_break((after, 0), quality);
        if self.units + 1 + self.close_units > self.limit {
            return true;
        }
        self.html.push('\n');
        self.units += 1;
        self.pos = (self.pos.0 + 1, 0);
        false
    }

    /// Text from the current offset, escaped, a character at a time while it fits; every
    /// space is a place to end.
    fn text(&mut self, text: &str) -> bool {
        for c in text[self.pos.1..].chars() {
            if c == ' ' {
                self.mark_break((self.pos.0, self.pos.1 + 1), 1);
            }
            let before = self.html.len();
            push_escaped(&mut self.html, c);
            let c_units = utf16_len(&self.html[before..]);
            if self.units + c_units + self.close_units > self.limit {
                self.html.truncate(before);
                return true;
            }
            self.units += c_units;
            self.pos.1 += c.len_utf8();
        }
        self.pos = (self.pos.0 + 1, 0);
        false
    }

    /// Records a place to end here, the next part resuming at `resume`.
    fn mark_break(&mut self, resume: (usize, usize), quality: u8) {
        self.breaks.push(Break {
            html_len: self.html.len(),
            stack: self.stack.clone(),
            resume,
            quality,
            units: self.units,
        });
    }

    /// Ends a full part at its best break: the best in its second half, else the latest, else
    /// right here.
    fn cut(&mut self) {
        let (start_units, limit) = (self.start_units, self.limit);
        let best = self
            .breaks
            .iter()
            .filter(|b| b.units > start_units && b.units * 2 >= limit)
            .max_by_key(|b| (b.quality, b.units))
            .or_else(|| self.breaks.iter().rfind(|b| b.units > start_units))
            .cloned();
        if let Some(b) = best {
            self.html.truncate(b.html_len);
            self.stack = b.stack;
            self.pos = b.resume;
        }
    }
}
