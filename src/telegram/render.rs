//! The model's Markdown as Telegram HTML, split into messages Telegram accepts.
//!
//! Rendering parses Markdown with pulldown-cmark into a flat token stream (open tag, close tag,
//! text, newline) using only the tags Telegram's HTML mode knows, with `&`, `<`, `>` and `"`
//! escaped. Telegram has no headings, lists or tables, so they are drawn: h1 bold underlined,
//! h2 bold, deeper ones bold italic; each list item on its own line, nested ones indented;
//! a table as an aligned monospace block, or one bullet per row when it is too wide for a
//! phone. Splitting then packs tokens into parts of at most [`TELEGRAM_LIMIT`] UTF-16 code
//! units of *HTML source* (stricter than Telegram's limit on visible text, so a part can never
//! be refused for length). A part ends at the best break point available: a paragraph break,
//! else a line break, else a space, else any character boundary. Tags open at the cut are closed
//! at the end of the part and reopened at the start of the next, so a code block split in two is
//! two valid code blocks.
//!
//! Live frames of an answer still streaming go through [`render_partial`], which holds back
//! markup whose end has not arrived yet.
//!
//! ```
//! use heurist::telegram::render::render_parts;
//! let parts = render_parts("**Hi** <you> & `code`");
//! assert_eq!(parts, vec!["<b>Hi</b> &lt;you&gt; &amp; <code>code</code>".to_string()]);
//! ```

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Telegram's maximum message length, in UTF-16 code units.
pub(crate) const TELEGRAM_LIMIT: usize = 4096;

/// Longest link target rendered as a link; longer ones stay text (see [`split`]'s reopening).
const MAX_HREF_BYTES: usize = 1024;

/// Indentation of one level of list nesting: no-break spaces, which Telegram never trims and
/// a part is never cut at.
const LIST_INDENT: &str = "\u{a0}\u{a0}\u{a0}\u{a0}";

/// Widest table row, in characters, drawn as an aligned monospace block; wider tables would
/// wrap on a phone, so they become one bullet per row.
const MAX_TABLE_WIDTH: usize = 40;

/// Columns of an aligned table are this far apart.
const COLUMN_GAP: &str = "  ";

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open { open: String, close: &'static str },
    Close,
    Text(String),
    Newline,
}

/// Renders Markdown into Telegram HTML parts of at most [`TELEGRAM_LIMIT`] UTF-16 units.
pub fn render_parts(markdown: &str) -> Vec<String> {
    render_parts_with_limit(markdown, TELEGRAM_LIMIT)
}

/// [`render_parts`] with another limit (tests use small ones).
pub(crate) fn render_parts_with_limit(markdown: &str, limit: usize) -> Vec<String> {
    split(&tokens(markdown), limit)
        .into_iter()
        .filter(|part| !html_to_plain(part).trim().is_empty())
        .collect()
}

/// Renders a live frame of an answer still being written: the Markdown so far, with markup
/// whose end has not arrived held back, so the screen never shows a raw `**`, `` ` `` or
/// `[text](ur`. The held-back text appears once its markup is closed (or its block ends); an
/// unclosed code fence shows as a code block of what is there.
///
/// ```
/// use heurist::telegram::render::render_partial;
/// assert_eq!(render_partial("Paris is **the cap"), vec!["Paris is".to_string()]);
/// assert_eq!(render_partial("Paris is **the capital**"), vec!["Paris is <b>the capital</b>".to_string()]);
/// ```
pub fn render_partial(markdown: &str) -> Vec<String> {
    render_parts(settled(markdown))
}

/// Cuts back before an unclosed opener at most this often; then the whole unfinished block
/// is held back.
const MAX_CUTS: usize = 4;

/// The longest prefix of `markdown` without half-written markup (see [`render_partial`]).
fn settled(markdown: &str) -> &str {
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

/// The visible text of a part we rendered: tags removed, our four entities decoded. Used as the
/// fallback when Telegram refuses a part's HTML.
pub fn html_to_plain(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// Escapes text for Telegram HTML (also safe inside attribute values).
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        _ => out.push(c),
    }
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Builds the token stream; the only place that knows Markdown.
struct Tokenizer {
    toks: Vec<Tok>,
    /// Open lists: `Some(next number)` for ordered ones.
    lists: Vec<Option<u64>>,
    /// Whether each open link produced a tag (unsafe URLs render as plain text).
    links: Vec<bool>,
    /// Telegram does not nest blockquotes; only the outermost one is a tag.
    quote_depth: usize,
    /// The table being read: its cells are collected, then laid out at its end.
    table: Option<Table>,
}

/// A table's cells as tokens (inline markup included), the header row first.
struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<Vec<Tok>>>,
    /// Where the current cell's tokens begin in [`Tokenizer::toks`].
    cell_start: usize,
}

/// The Markdown extensions the model uses and Telegram can show.
fn markdown_options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

fn tokens(markdown: &str) -> Vec<Tok> {
    let mut t = Tokenizer {
        toks: Vec::new(),
        lists: Vec::new(),
        links: Vec::new(),
        quote_depth: 0,
        table: None,
    };
    for event in Parser::new_ext(markdown, markdown_options()) {
        t.event(event);
    }
    t.trim_newlines();
    t.toks
}

impl Tokenizer {
    fn open(&mut self, open: impl Into<String>, close: &'static str) {
        self.toks.push(Tok::Open {
            open: open.into(),
            close,
        });
    }

    fn text(&mut self, text: &str) {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.toks.push(Tok::Newline);
            }
            if !line.is_empty() {
                self.toks.push(Tok::Text(line.to_string()));
            }
        }
    }

    /// Closes the innermost open tag; a tag with nothing inside is dropped instead (Telegram
    /// has no use for an empty entity).
    fn close(&mut self) {
        if matches!(self.toks.last(), Some(Tok::Open { .. })) {
            self.toks.pop();
        } else {
            self.toks.push(Tok::Close);
        }
    }

    fn trim_newlines(&mut self) {
        while self.toks.last() == Some(&Tok::Newline) {
            self.toks.pop();
        }
    }

    /// Ends a block: a blank line after it (a single line break inside lists).
    fn end_block(&mut self) {
        let wanted = if self.lists.is_empty() { 2 } else { 1 };
        let trailing = self
            .toks
            .iter()
            .rev()
            .take_while(|t| **t == Tok::Newline)
            .count();
        if self.toks.is_empty() {
            return;
        }
        for _ in trailing..wanted {
            self.toks.push(Tok::Newline);
        }
    }

    /// Closes a block element without the blank line that its last paragraph left inside it.
    fn close_block(&mut self) {
        self.trim_newlines();
        self.close();
        self.end_block();
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => self.text(&text),
            Event::InlineMath(text) | Event::DisplayMath(text) => self.text(&text),
            Event::Code(code) => {
                self.open("<code>", "</code>");
                self.text(&code);
                self.close();
            }
            Event::SoftBreak | Event::HardBreak => self.toks.push(Tok::Newline),
            Event::Rule => {
                self.text("──────────");
                self.end_block();
            }
            Event::TaskListMarker(done) => self.text(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(label) => self.text(&format!("[{label}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            // Levels look different: h1 bold and underlined, h2 bold, deeper ones bold italic.
            Tag::Heading { level, .. } => match level {
                HeadingLevel::H1 => self.open("<b><u>", "</u></b>"),
                HeadingLevel::H2 => self.open("<b>", "</b>"),
                _ => self.open("<b><i>", "</i></b>"),
            },
            Tag::BlockQuote(_) => {
                self.quote_depth += 1;
                if self.quote_depth == 1 {
                    self.open("<blockquote>", "</blockquote>");
                }
            }
            Tag::CodeBlock(kind) => self.start_code_block(&kind),
            Tag::List(start) => self.start_list(start),
            Tag::Item => self.start_item(),
            Tag::Emphasis => self.open("<i>", "</i>"),
            Tag::Strong => self.open("<b>", "</b>"),
            Tag::Strikethrough => self.open("<s>", "</s>"),
            Tag::Link { dest_url, .. } => self.start_link(&dest_url),
            Tag::Table(alignments) => {
                self.table = Some(Table {
                    alignments,
                    rows: Vec::new(),
                    cell_start: self.toks.len(),
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(table) = &mut self.table {
                    table.cell_start = self.toks.len();
                }
            }
            Tag::FootnoteDefinition(label) => self.text(&format!("[{label}]: ")),
            _ => {}
        }
    }

    /// A code block: `<pre>`, with its language as a class when the fence names one.
    fn start_code_block(&mut self, kind: &CodeBlockKind<'_>) {
        let language = match kind {
            CodeBlockKind::Fenced(info) => info
                .split_whitespace()
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(*c))
                .collect::<String>(),
            CodeBlockKind::Indented => String::new(),
        };
        if language.is_empty() {
            self.open("<pre>", "</pre>");
        } else {
            self.open(
                format!("<pre><code class=\"language-{language}\">"),
                "</code></pre>",
            );
        }
    }

    /// A list, numbered from `start` or bulleted.
    fn start_list(&mut self, start: Option<u64>) {
        // A nested list starts on its own line, not glued to its parent item's text.
        if !self.lists.is_empty() && !self.toks.is_empty() {
            self.trim_newlines();
            self.toks.push(Tok::Newline);
        }
        self.lists.push(start);
    }

    /// A list item: its marker, indented by the list's depth.
    fn start_item(&mut self) {
        let depth = self.lists.len().saturating_sub(1);
        let marker = match self.lists.last_mut() {
            Some(Some(n)) => {
                let marker = format!("{n}. ");
                *n += 1;
                marker
            }
            _ => "• ".to_string(),
        };
        self.text(&format!("{}{marker}", LIST_INDENT.repeat(depth)));
    }

    /// A link, kept only with a safe URL short enough to reopen in a split part (else its
    /// text stays plain).
    fn start_link(&mut self, dest_url: &str) {
        let href = escape_html(dest_url);
        let safe = is_safe_url(dest_url) && href.len() <= MAX_HREF_BYTES;
        if safe {
            self.open(format!("<a href=\"{href}\">"), "</a>");
        }
        self.links.push(safe);
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock | TagEnd::FootnoteDefinition => self.end_block(),
            TagEnd::Heading(_) | TagEnd::CodeBlock => self.close_block(),
            TagEnd::BlockQuote(_) => {
                self.quote_depth -= 1;
                if self.quote_depth == 0 {
                    self.close_block();
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.end_block();
            }
            TagEnd::Item if self.toks.last() != Some(&Tok::Newline) => {
                self.toks.push(Tok::Newline);
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.close(),
            TagEnd::Link if self.links.pop() == Some(true) => self.close(),
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table {
                    let cell = self.toks.split_off(table.cell_start.min(self.toks.len()));
                    if let Some(row) = table.rows.last_mut() {
                        row.push(cell);
                    }
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.lay_out_table(table);
                }
                self.end_block();
            }
            _ => {}
        }
    }
}

impl Tokenizer {
    /// Lays a table out: an aligned monospace block when its rows fit a phone's width, else one
    /// bullet per row ("• Header: value · Header: value"), which keeps the cells' markup.
    fn lay_out_table(&mut self, table: Table) {
        let plain: Vec<Vec<String>> = table
            .rows
            .iter()
            .map(|row| row.iter().map(|cell| cell_text(cell)).collect())
            .collect();
        let widths = column_widths(&plain);
        let width =
            widths.iter().sum::<usize>() + COLUMN_GAP.len() * widths.len().saturating_sub(1);
        if width == 0 {
            return;
        }
        if width <= MAX_TABLE_WIDTH {
            self.lay_out_monospace(&plain, &widths, &table.alignments, width);
        } else {
            self.lay_out_bullets(table.rows);
        }
    }

    /// A table that fits a phone's width: aligned columns in `<pre>`, a rule under the header.
    fn lay_out_monospace(
        &mut self,
        plain: &[Vec<String>],
        widths: &[usize],
        alignments: &[Alignment],
        width: usize,
    ) {
        self.open("<pre>", "</pre>");
        for (i, row) in plain.iter().enumerate() {
            if i > 0 {
                self.toks.push(Tok::Newline);
            }
            let line: Vec<String> = (0..widths.len())
                .map(|c| {
                    let cell = row.get(c).map_or("", String::as_str);
                    let alignment = alignments.get(c).copied();
                    pad(cell, widths[c], alignment.unwrap_or(Alignment::None))
                })
                .collect();
            self.text(line.join(COLUMN_GAP).trim_end());
            if i == 0 {
                self.toks.push(Tok::Newline);
                self.text(&"─".repeat(width));
            }
        }
        self.close();
    }

    /// A table too wide for a phone: one bullet per row ("• Header: value · Header: value"),
    /// which keeps the cells' markup; a table of only a header lists its names.
    fn lay_out_bullets(&mut self, rows: Vec<Vec<Vec<Tok>>>) {
        let mut rows = rows.into_iter();
        let header: Vec<String> = rows
            .next()
            .map(|row| row.iter().map(|cell| cell_text(cell)).collect())
            .unwrap_or_default();
        let body: Vec<Vec<Vec<Tok>>> = rows.collect();
        if body.is_empty() {
            let names: Vec<&str> = header
                .iter()
                .map(String::as_str)
                .filter(|h| !h.is_empty())
                .collect();
            self.text(&format!("• {}", names.join(" · ")));
            return;
        }
        for (i, row) in body.into_iter().enumerate() {
            if i > 0 {
                self.toks.push(Tok::Newline);
            }
            self.text("• ");
            let mut first = true;
            for (c, cell) in row.into_iter().enumerate() {
                if cell_text(&cell).is_empty() {
                    continue;
                }
                if !first {
                    self.text(" · ");
                }
                first = false;
                if let Some(name) = header.get(c).filter(|h| !h.is_empty()) {
                    self.text(&format!("{name}: "));
                }
                self.toks.extend(cell.into_iter().map(|t| match t {
                    Tok::Newline => Tok::Text(" ".to_string()),
                    other => other,
                }));
            }
        }
    }
}

/// The width of each column of `plain`, in characters: its widest cell.
fn column_widths(plain: &[Vec<String>]) -> Vec<usize> {
    let columns = plain.iter().map(Vec::len).max().unwrap_or(0);
    (0..columns)
        .map(|c| {
            plain
                .iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// A cell's visible text on one line (inline markup dropped, as a monospace block needs).
fn cell_text(cell: &[Tok]) -> String {
    let text: String = cell
        .iter()
        .filter_map(|t| match t {
            Tok::Text(text) => Some(text.as_str()),
            Tok::Newline => Some(" "),
            _ => None,
        })
        .collect();
    text.trim().to_string()
}

/// `cell` padded with spaces to `width` characters as its column is aligned.
fn pad(cell: &str, width: usize, alignment: Alignment) -> String {
    let missing = width.saturating_sub(cell.chars().count());
    let (left, right) = match alignment {
        Alignment::Right => (missing, 0),
        Alignment::Center => (missing / 2, missing - missing / 2),
        Alignment::None | Alignment::Left => (0, missing),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}

/// Telegram accepts only absolute links of a few schemes; anything else would make it refuse
/// the whole message.
fn is_safe_url(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https" | "tg" | "mailto"))
}

/// A place where a part may end.
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

fn closing(stack: &[(String, &'static str)]) -> String {
    stack.iter().rev().map(|(_, close)| *close).collect()
}

/// Packs tokens into parts of at most `limit` UTF-16 units, cutting at the best break.
fn split(toks: &[Tok], limit: usize) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A strict checker of what we produce: only Telegram's tags, properly nested, nothing
    /// inside code but text (a `<pre>` may hold one `<code>`), no blockquote in a blockquote.
    fn assert_valid(part: &str) {
        // Open tags with where their content starts.
        let mut stack: Vec<(String, usize)> = Vec::new();
        let mut at = 0;
        while let Some(lt) = part[at..].find('<').map(|i| i + at) {
            let gt = part[lt..].find('>').expect("unclosed tag") + lt;
            let tag = &part[lt + 1..gt];
            if let Some(name) = tag.strip_prefix('/') {
                let (open, content) = stack.pop().expect("close without open");
                assert_eq!(open, name, "misnested in {part:?}");
                assert!(content < lt, "empty <{name}> in {part:?}");
            } else {
                let name = tag.split_whitespace().next().unwrap().to_string();
                assert!(
                    ["b", "i", "s", "u", "code", "pre", "a", "blockquote"].contains(&name.as_str()),
                    "unknown tag {name}"
                );
                let parent = stack.last().map(|(t, _)| t.as_str());
                assert!(
                    parent != Some("code") && (parent != Some("pre") || name == "code"),
                    "<{name}> inside <{}> in {part:?}",
                    parent.unwrap_or_default()
                );
                assert!(
                    name != "blockquote" || !stack.iter().any(|(t, _)| t == "blockquote"),
                    "nested blockquote in {part:?}"
                );
                stack.push((name, gt + 1));
            }
            at = gt + 1;
        }
        assert!(stack.is_empty(), "unclosed {stack:?} in {part:?}");
    }

    #[test]
    fn rendering_cases() {
        struct Case {
            name: &'static str,
            markdown: &'static str,
            html: &'static str,
        }
        let cases = [
            Case {
                name: "escaping",
                markdown: "a < b && c > d",
                html: "a &lt; b &amp;&amp; c &gt; d",
            },
            Case {
                name: "emphasis",
                markdown: "*i* **b** ~~s~~",
                html: "<i>i</i> <b>b</b> <s>s</s>",
            },
            Case {
                name: "h1 is bold and underlined",
                markdown: "# Title\n\ntext",
                html: "<b><u>Title</u></b>\n\ntext",
            },
            Case {
                name: "h2 is bold",
                markdown: "## Section\n\ntext",
                html: "<b>Section</b>\n\ntext",
            },
            Case {
                name: "h3 and deeper are bold italic",
                markdown: "### Detail\n\n#### Finer",
                html: "<b><i>Detail</i></b>\n\n<b><i>Finer</i></b>",
            },
            Case {
                name: "markup inside a heading",
                markdown: "# The `main` *idea*",
                html: "<b><u>The <code>main</code> <i>idea</i></u></b>",
            },
            Case {
                name: "code block with language",
                markdown: "```rust\nfn main() {}\n```",
                html: "<pre><code class=\"language-rust\">fn main() {}</code></pre>",
            },
            Case {
                name: "code block without language",
                markdown: "```\na<b\n```",
                html: "<pre>a&lt;b</pre>",
            },
            Case {
                name: "link",
                markdown: "[x](https://e.com/?a=1&b=\"2\")",
                html: "<a href=\"https://e.com/?a=1&amp;b=&quot;2&quot;\">x</a>",
            },
            Case {
                name: "unsafe link is text",
                markdown: "[x](javascript:alert(1))",
                html: "x",
            },
            Case {
                name: "lists",
                markdown: "- a\n- b\n\n1. c\n2. d",
                html: "• a\n• b\n\n1. c\n2. d",
            },
            Case {
                name: "ordered list keeps its start number",
                markdown: "3. c\n4. d",
                html: "3. c\n4. d",
            },
            Case {
                name: "nested list on its own lines, indented",
                markdown: "- Add a .gitignore\n  - ignore .venv/\n  - ignore target/\n- Commit",
                html: "• Add a .gitignore\n\u{a0}\u{a0}\u{a0}\u{a0}• ignore .venv/\n\u{a0}\u{a0}\u{a0}\u{a0}• ignore target/\n• Commit",
            },
            Case {
                name: "numbered steps nested in a bullet, three levels",
                markdown: "- Setup\n  1. install\n  2. configure\n     - edit the file\n- Run",
                html: "• Setup\n\u{a0}\u{a0}\u{a0}\u{a0}1. install\n\u{a0}\u{a0}\u{a0}\u{a0}2. configure\n\u{a0}\u{a0}\u{a0}\u{a0}\u{a0}\u{a0}\u{a0}\u{a0}• edit the file\n• Run",
            },
            Case {
                name: "nested list in a loose list",
                markdown: "- First\n\n  - inner\n\n- Second",
                html: "• First\n\u{a0}\u{a0}\u{a0}\u{a0}• inner\n• Second",
            },
            Case {
                name: "empty code block and empty link leave nothing behind",
                markdown: "a [](https://e.com) b\n\n```\n```",
                html: "a  b",
            },
            Case {
                name: "nested quote is one tag",
                markdown: "> a\n> > b",
                html: "<blockquote>a\n\nb</blockquote>",
            },
            Case {
                name: "raw html is escaped",
                markdown: "<script>x</script>",
                html: "&lt;script&gt;x&lt;/script&gt;",
            },
            Case {
                name: "narrow table is an aligned block with a rule under the header",
                markdown: "| Tool | Speed |\n|---|--:|\n| rg | fast |\n| grep | slow |",
                html: "<pre>Tool  Speed\n───────────\nrg     fast\ngrep   slow</pre>",
            },
            Case {
                name: "centred column and a short row",
                markdown: "| Name | Mid | End |\n|---|:-:|---|\n| a | b | c |\n| long name | x |",
                html: "<pre>Name       Mid  End\n───────────────────\na           b   c\nlong name   x</pre>",
            },
            Case {
                name: "cell markup is plain text in the block, and escaped",
                markdown: "|a<b|c|\n|-|-|\n|**x**|`y` [z](https://e.com)|",
                html: "<pre>a&lt;b  c\n────────\nx    y z</pre>",
            },
            Case {
                name: "wide table is one bullet per row, cells keep their markup",
                markdown: "| Tool | Speed | Notes |\n|---|---|---|\n| ripgrep | **fast** | respects .gitignore files |\n| grep |  | everywhere, in every script |",
                html: "• Tool: ripgrep · Speed: <b>fast</b> · Notes: respects .gitignore files\n• Tool: grep · Notes: everywhere, in every script",
            },
            Case {
                name: "wide table without rows lists its header",
                markdown: "| A header that is long | and another long header |\n|---|---|",
                html: "• A header that is long · and another long header",
            },
            Case {
                name: "table between paragraphs",
                markdown: "Before\n\n|a|b|\n|-|-|\n|1|2|\n\nAfter",
                html: "Before\n\n<pre>a  b\n────\n1  2</pre>\n\nAfter",
            },
        ];
        for case in cases {
            let parts = render_parts(case.markdown);
            assert_eq!(parts, vec![case.html.to_string()], "case {}", case.name);
            assert_valid(&parts[0]);
        }
    }

    #[test]
    fn live_frame_cases() {
        struct Case {
            name: &'static str,
            markdown: &'static str,
            html: &'static str,
        }
        let cases = [
            Case {
                name: "unclosed bold is held back",
                markdown: "Paris is **the cap",
                html: "Paris is",
            },
            Case {
                name: "closed bold shows",
                markdown: "Paris is **the capital**",
                html: "Paris is <b>the capital</b>",
            },
            Case {
                name: "bold opener at the very end",
                markdown: "Hello **",
                html: "Hello",
            },
            Case {
                name: "half a closer",
                markdown: "Hi **bold*",
                html: "Hi",
            },
            Case {
                name: "unclosed italic with underscores",
                markdown: "an _idea",
                html: "an",
            },
            Case {
                name: "unclosed strikethrough",
                markdown: "was ~~wrong",
                html: "was",
            },
            Case {
                name: "unclosed code span",
                markdown: "run `cargo te",
                html: "run",
            },
            Case {
                name: "link text still coming",
                markdown: "see [the do",
                html: "see",
            },
            Case {
                name: "link target still coming",
                markdown: "see [the docs](https://exa",
                html: "see",
            },
            Case {
                name: "link complete",
                markdown: "see [the docs](https://e.com)",
                html: "see <a href=\"https://e.com\">the docs</a>",
            },
            Case {
                name: "bracket that cannot become a link stays",
                markdown: "array[0] is first",
                html: "array[0] is first",
            },
            Case {
                name: "image still coming",
                markdown: "look ![a cat](https://e",
                html: "look",
            },
            Case {
                name: "markup before the opener stays",
                markdown: "**Done**, and *now",
                html: "<b>Done</b>, and",
            },
            Case {
                name: "unclosed fence is a code block of what is there",
                markdown: "Code:\n\n```rust\nfn main() {",
                html: "Code:\n\n<pre><code class=\"language-rust\">fn main() {</code></pre>",
            },
            Case {
                name: "fence being typed",
                markdown: "Code:\n\n``",
                html: "Code:",
            },
            Case {
                name: "fence info being typed",
                markdown: "Code:\n\n```ru",
                html: "Code:",
            },
            Case {
                name: "closing fence being typed",
                markdown: "```\nx < y\n``",
                html: "<pre>x &lt; y</pre>",
            },
            Case {
                name: "markers in code are not markup",
                markdown: "```\nlet s = \"**\";\n",
                html: "<pre>let s = &quot;**&quot;;</pre>",
            },
            Case {
                name: "only the last block is held back",
                markdown: "2*3 is six\n\nand `",
                html: "2*3 is six\n\nand",
            },
            Case {
                name: "snake_case is no opener",
                markdown: "call my_var_name now",
                html: "call my_var_name now",
            },
            Case {
                name: "escaped and spaced stars are text",
                markdown: "a \\*star and a * b",
                html: "a *star and a * b",
            },
            Case {
                name: "table header waiting for its delimiter row",
                markdown: "Results:\n\n| Tool | Speed |",
                html: "Results:",
            },
            Case {
                name: "table row in progress",
                markdown: "|a|b|\n|-|-|\n|1",
                html: "<pre>a  b\n────\n1</pre>",
            },
            Case {
                name: "opener in a nested item",
                markdown: "- a\n  - **b",
                html: "• a",
            },
            Case {
                name: "a bare bullet waits for its text",
                markdown: "Steps:\n\n1. one\n2.",
                html: "Steps:\n\n1. one",
            },
            Case {
                name: "a setext underline in the making does not make a heading",
                markdown: "Title\n-",
                html: "Title",
            },
        ];
        for case in cases {
            let parts = render_partial(case.markdown);
            let expected: Vec<String> = Some(case.html.to_string())
                .filter(|h| !h.is_empty())
                .into_iter()
                .collect();
            assert_eq!(parts, expected, "case {}", case.name);
            parts.iter().for_each(|p| assert_valid(p));
        }
    }

    #[test]
    fn long_code_block_splits_into_valid_parts() {
        let code: String = (0..400)
            .map(|i| format!("let x{i} = {i} < {};\n", i + 1))
            .collect();
        let markdown = format!("Intro paragraph.\n\n```rust\n{code}```\n\nOutro **bold** text.");
        let parts = render_parts_with_limit(&markdown, 1000);
        assert!(parts.len() > 5);
        for part in &parts {
            assert!(utf16_len(part) <= 1000, "{} units", utf16_len(part));
            assert_valid(part);
        }
        let visible: String = parts
            .iter()
            .map(|p| html_to_plain(p))
            .collect::<Vec<_>>()
            .join("\n");
        for i in 0..400 {
            assert!(
                visible.contains(&format!("let x{i} = {i} < {};", i + 1)),
                "line {i} lost"
            );
        }
        assert!(
            parts[1].starts_with("<pre><code class=\"language-rust\">"),
            "{}",
            parts[1]
        );
        assert!(parts.last().unwrap().contains("Outro <b>bold</b> text."));
    }

    #[test]
    fn splits_at_words_then_characters_and_counts_utf16() {
        let words = "wörd 😀 ".repeat(300);
        for part in render_parts_with_limit(&words, 100) {
            assert!(utf16_len(&part) <= 100);
            assert!(!part.starts_with(' '));
        }
        let unbroken = "😀".repeat(500);
        let parts = render_parts_with_limit(&unbroken, 101);
        assert!(parts.iter().all(|p| utf16_len(p) <= 101));
        assert_eq!(parts.concat(), unbroken);
    }

    #[test]
    fn entities_are_never_cut() {
        let parts = render_parts_with_limit(&"&".repeat(100), 12);
        for part in &parts {
            assert!(part.split("&amp;").all(|s| s.is_empty()), "{part}");
        }
        assert_eq!(
            parts.iter().map(|p| html_to_plain(p)).collect::<String>(),
            "&".repeat(100)
        );
    }

    #[test]
    fn empty_and_whitespace_render_nothing() {
        assert!(render_parts("").is_empty());
        assert!(render_parts("  \n\n ").is_empty());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Markdown-ish text: the constructs that interact in rendering and splitting.
        fn markdown() -> impl Strategy<Value = String> {
            let pieces = prop::sample::select(vec![
                "**",
                "*",
                "_",
                "~~",
                "`",
                "\n```rust\n",
                "\n```\n",
                "\n",
                "\n\n",
                "# ",
                "## ",
                "### ",
                "- ",
                "\n  - ",
                "\n    1. ",
                "1. ",
                "> ",
                "[link](https://example.com/?a=1&b=2)",
                "<b>",
                "&amp;",
                "&",
                "<",
                ">",
                "\"",
                "😀",
                "é",
                "漢",
                " ",
                "word",
                "longerword",
                "|a|b|\n|-|-|\n|1|2|\n",
                "\n\n|Tool|Speed|Notes|\n|:-|-:|:-:|\n|ripgrep|**fast**|a long note, too wide for a phone|\n|x|",
                "![img](https://e.com/i.png)",
                "\\*",
            ]);
            prop::collection::vec(pieces, 0..400).prop_map(|p| p.concat())
        }

        /// Answers whose markup is all closed, as a model writes them.
        fn well_formed() -> impl Strategy<Value = String> {
            let pieces = prop::sample::select(vec![
                "word ",
                "other words ",
                "**bold words** ",
                "*italic* ",
                "_italic_ ",
                "~~gone~~ ",
                "`code` ",
                "[link](https://example.com/x) ",
                "\n\n",
                "\n",
                "\n\n# Head\n\n",
                "\n\n### Small head\n\n",
                "\n\n- item one\n- item **two**\n  - nested `one`\n\n",
                "\n\n1. first\n2. second\n\n",
                "\n\n```rust\nlet a = 1;\n```\n\n",
                "\n\n| Tool | Speed |\n|---|---|\n| rg | fast |\n\n",
                "\n\n> quoted *text*\n\n",
            ]);
            prop::collection::vec(pieces, 0..60).prop_map(|p| p.concat())
        }

        /// Characters of Markdown syntax that well-formed answers only use as markup.
        const SYNTAX: &[char] = &['*', '_', '~', '`', '[', ']', '(', ')', '|', '#', '>'];

        fn prefix(text: &str, fraction: f64) -> &str {
            let mut end = (text.len() as f64 * fraction) as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            &text[..end]
        }

        fn squeeze(text: &str) -> String {
            text.chars().filter(|c| !c.is_whitespace()).collect()
        }

        /// Bytes of a long live frame: a long answer near the end of its stream.
        const LONG: usize = 100_000;

        /// Far above what a linear pass over [`LONG`] bytes takes in a debug build (0.1 s for
        /// most inputs; 1.5 s for the saved case of 50,000 hard line breaks, which took over
        /// 4 s with a real-model benchmark holding both cores), far below the minutes a
        /// quadratic one took.
        const FRAME_BOUND: std::time::Duration = std::time::Duration::from_secs(20);

        /// Renders `markdown` as a live frame, failing once that takes over [`FRAME_BOUND`]
        /// (without waiting for a slow render to end).
        fn renders_in_time(markdown: String) -> Result<(), String> {
            let (done, finished) = std::sync::mpsc::channel();
            let bytes = markdown.len();
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                for part in render_partial(&markdown) {
                    assert_valid(&part);
                }
                let _ = done.send(started.elapsed());
            });
            match finished.recv_timeout(FRAME_BOUND) {
                Ok(_) => Ok(()),
                Err(_) => Err(format!(
                    "a live frame of {bytes} bytes took over {FRAME_BOUND:?}"
                )),
            }
        }

        /// `pattern` repeated to [`LONG`] bytes, then `tail`.
        fn long_run(pattern: &str, tail: &str) -> String {
            let mut text = pattern.repeat(LONG / pattern.len().max(1));
            text.push_str(tail);
            text
        }

        #[test]
        fn long_runs_render_in_linear_time() {
            let cases = [
                ("backslashes", "\\", ""),
                ("backslashes before a star", "\\", "*"),
                ("backslashes before a bracket", "\\", "[a"),
                ("links never closed", "[a](", ""),
                ("links closed at the very end", "[a](", ")"),
                ("brackets closed at the very end", "[", "]x"),
                ("escaped brackets", "\\[", "]"),
                ("image links", "![a](", ""),
                ("emphasis runs", "*_~", "a"),
            ];
            for (name, pattern, tail) in cases {
                if let Err(e) = renders_in_time(long_run(pattern, tail)) {
                    panic!("case {name}: {e}");
                }
            }
        }

        /// Short patterns of the characters inline markup is made of, repeated into long
        /// frames.
        fn long_hostile() -> impl Strategy<Value = String> {
            let pieces = || {
                prop::sample::select(vec![
                    "\\", "\\\\", "[a](", "[", "]", "(", ")", "![", "*", "_", "~", "`", "a", " ",
                    "\n",
                ])
            };
            (
                prop::collection::vec(pieces(), 1..6),
                prop::collection::vec(pieces(), 0..4),
            )
                .prop_map(|(pattern, tail)| long_run(&pattern.concat(), &tail.concat()))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            #[test]
            fn parts_are_valid_bounded_and_keep_the_text(md in markdown(), limit in 64usize..600) {
                let parts = render_parts_with_limit(&md, limit);
                for part in &parts {
                    prop_assert!(utf16_len(part) <= limit, "{} > {limit}", utf16_len(part));
                    assert_valid(part);
                }
                let whole = render_parts_with_limit(&md, usize::MAX / 4);
                let expected: String = whole.iter().map(|p| squeeze(&html_to_plain(p))).collect();
                let got: String = parts.iter().map(|p| squeeze(&html_to_plain(p))).collect();
                prop_assert_eq!(got, expected);
            }

            #[test]
            fn arbitrary_text_never_breaks_the_renderer(text in ".{0,2000}") {
                for part in render_parts(&text).into_iter().chain(render_partial(&text)) {
                    prop_assert!(utf16_len(&part) <= TELEGRAM_LIMIT);
                    assert_valid(&part);
                }
            }

            #[test]
            fn live_frames_are_valid_and_bounded(md in markdown(), fraction in 0.0f64..=1.0) {
                let md = md.repeat(4);
                for part in render_partial(prefix(&md, fraction)) {
                    prop_assert!(utf16_len(&part) <= TELEGRAM_LIMIT, "{} units", utf16_len(&part));
                    assert_valid(&part);
                }
            }

            #[test]
            fn live_frames_never_show_raw_markup(doc in well_formed(), fraction in 0.0f64..=1.0) {
                let frame = render_partial(prefix(&doc, fraction));
                for part in &frame {
                    assert_valid(part);
                    let visible = html_to_plain(part);
                    prop_assert!(!visible.contains(SYNTAX), "raw markup in {visible:?}");
                }
                prop_assert_eq!(render_partial(&doc), render_parts(&doc), "the whole answer");
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(12))]

            #[test]
            fn long_live_frames_render_in_linear_time(md in long_hostile()) {
                prop_assert!(renders_in_time(md).is_ok());
            }
        }
    }
}
