//! The Markdown walk: pulldown-cmark's events as a flat stream of [`Tok`]s, with only the tags
//! Telegram's HTML knows, headings and lists drawn as text, and unsafe links left as text.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::html::{Tok, escape_html};

mod table;

/// Longest link target rendered as a link; longer ones stay text (see [`super::split()`]'s reopening).
const MAX_HREF_BYTES: usize = 1024;

/// Indentation of one level of list nesting: no-break spaces, which Telegram never trims and
/// a part is never cut at.
const LIST_INDENT: &str = "\u{a0}\u{a0}\u{a0}\u{a0}";

/// Builds the token stream; the only place that knows Markdown.
pub(super) struct Tokenizer {
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
pub(super) struct Table {
    alignments: Vec<Alignment>,
    rows: Vec<Vec<Vec<Tok>>>,
    /// Where the current cell's tokens begin in [`Tokenizer::toks`].
    cell_start: usize,
}

/// The Markdown extensions the model uses and Telegram can show.
pub(super) fn markdown_options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// The tokens of `markdown`, without leading or trailing line breaks.
pub(super) fn tokens(markdown: &str) -> Vec<Tok> {
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

/// Telegram accepts only absolute links of a few schemes; anything else would make it refuse
/// the whole message.
fn is_safe_url(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https" | "tg" | "mailto"))
}
