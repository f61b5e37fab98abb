//! The model's Markdown as Telegram HTML, split into messages Telegram accepts.
//!
//! Rendering parses Markdown with pulldown-cmark into a flat token stream (open tag, close tag,
//! text, newline) using only the tags Telegram's HTML mode knows, with `&`, `<`, `>` and `"`
//! escaped. Splitting then packs tokens into parts of at most [`TELEGRAM_LIMIT`] UTF-16 code
//! units of *HTML source* (stricter than Telegram's limit on visible text, so a part can never
//! be refused for length). A part ends at the best break point available: a paragraph break,
//! else a line break, else a space, else any character boundary. Tags open at the cut are closed
//! at the end of the part and reopened at the start of the next, so a code block split in two is
//! two valid code blocks.
//!
//! ```
//! use heurist::telegram::render::render_parts;
//! let parts = render_parts("**Hi** <you> & `code`");
//! assert_eq!(parts, vec!["<b>Hi</b> &lt;you&gt; &amp; <code>code</code>".to_string()]);
//! ```

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Telegram's maximum message length, in UTF-16 code units.
pub const TELEGRAM_LIMIT: usize = 4096;

/// Longest link target rendered as a link; longer ones stay text (see [`split`]'s reopening).
const MAX_HREF_BYTES: usize = 1024;

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
pub fn render_parts_with_limit(markdown: &str, limit: usize) -> Vec<String> {
    split(&tokens(markdown), limit)
        .into_iter()
        .filter(|part| !html_to_plain(part).trim().is_empty())
        .collect()
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
pub fn escape_html(text: &str) -> String {
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
    /// First cell of the current table row has not been written yet.
    first_cell: bool,
}

fn tokens(markdown: &str) -> Vec<Tok> {
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let mut t = Tokenizer {
        toks: Vec::new(),
        lists: Vec::new(),
        links: Vec::new(),
        quote_depth: 0,
        first_cell: true,
    };
    for event in Parser::new_ext(markdown, options) {
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
        self.toks.push(Tok::Close);
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
                self.toks.push(Tok::Close);
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
            Tag::Heading { .. } => self.open("<b>", "</b>"),
            Tag::BlockQuote(_) => {
                self.quote_depth += 1;
                if self.quote_depth == 1 {
                    self.open("<blockquote>", "</blockquote>");
                }
            }
            Tag::CodeBlock(kind) => {
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
            Tag::List(start) => self.lists.push(start),
            Tag::Item => {
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                self.text(&format!("{}{marker}", "  ".repeat(depth)));
            }
            Tag::Emphasis => self.open("<i>", "</i>"),
            Tag::Strong => self.open("<b>", "</b>"),
            Tag::Strikethrough => self.open("<s>", "</s>"),
            Tag::Link { dest_url, .. } => {
                // An overlong URL could not be reopened in a split part; it stays plain text.
                let href = escape_html(&dest_url);
                let safe = is_safe_url(&dest_url) && href.len() <= MAX_HREF_BYTES;
                if safe {
                    self.open(format!("<a href=\"{href}\">"), "</a>");
                }
                self.links.push(safe);
            }
            Tag::TableHead => {
                self.first_cell = true;
                self.open("<b>", "</b>");
            }
            Tag::TableRow => self.first_cell = true,
            Tag::TableCell => {
                if !self.first_cell {
                    self.text(" | ");
                }
                self.first_cell = false;
            }
            Tag::FootnoteDefinition(label) => self.text(&format!("[{label}]: ")),
            _ => {}
        }
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
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.toks.push(Tok::Close),
            TagEnd::Link if self.links.pop() == Some(true) => {
                self.toks.push(Tok::Close);
            }
            TagEnd::TableHead => {
                self.toks.push(Tok::Close);
                self.toks.push(Tok::Newline);
            }
            TagEnd::TableRow => self.toks.push(Tok::Newline),
            TagEnd::Table => self.end_block(),
            _ => {}
        }
    }
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
        let mut html: String = stack.iter().map(|(open, _)| open.as_str()).collect();
        let start_units = utf16_len(&html);
        let mut units = start_units;
        let mut close_units = utf16_len(&closing(&stack));
        let mut breaks: Vec<Break> = Vec::new();
        let mut overflow = false;

        'part: while pos.0 < toks.len() {
            match &toks[pos.0] {
                Tok::Open { open, close } => {
                    let need = utf16_len(open) + utf16_len(close);
                    if units + need + close_units + 1 > limit && units > start_units {
                        overflow = true;
                        break 'part;
                    }
                    html.push_str(open);
                    units += utf16_len(open);
                    close_units += utf16_len(close);
                    stack.push((open.clone(), close));
                    pos = (pos.0 + 1, 0);
                }
                Tok::Close => {
                    if let Some((_, close)) = stack.pop() {
                        html.push_str(close);
                        units += utf16_len(close);
                        close_units -= utf16_len(close);
                    }
                    pos = (pos.0 + 1, 0);
                }
                Tok::Newline => {
                    let mut after = pos.0;
                    while toks.get(after) == Some(&Tok::Newline) {
                        after += 1;
                    }
                    breaks.push(Break {
                        html_len: html.len(),
                        stack: stack.clone(),
                        resume: (after, 0),
                        quality: if after - pos.0 > 1 { 3 } else { 2 },
                        units,
                    });
                    if units + 1 + close_units > limit {
                        overflow = true;
                        break 'part;
                    }
                    html.push('\n');
                    units += 1;
                    pos = (pos.0 + 1, 0);
                }
                Tok::Text(text) => {
                    for c in text[pos.1..].chars() {
                        if c == ' ' {
                            breaks.push(Break {
                                html_len: html.len(),
                                stack: stack.clone(),
                                resume: (pos.0, pos.1 + 1),
                                quality: 1,
                                units,
                            });
                        }
                        let before = html.len();
                        push_escaped(&mut html, c);
                        let c_units = utf16_len(&html[before..]);
                        if units + c_units + close_units > limit {
                            html.truncate(before);
                            overflow = true;
                            break 'part;
                        }
                        units += c_units;
                        pos.1 += c.len_utf8();
                    }
                    pos = (pos.0 + 1, 0);
                }
            }
        }

        if overflow {
            // The best break in the second half of the part, else the latest, else right here.
            let best = breaks
                .iter()
                .filter(|b| b.units > start_units && b.units * 2 >= limit)
                .max_by_key(|b| (b.quality, b.units))
                .or_else(|| breaks.iter().rfind(|b| b.units > start_units))
                .cloned();
            if let Some(b) = best {
                html.truncate(b.html_len);
                stack = b.stack;
                pos = b.resume;
            }
        }
        if pos == part_start {
            // Not even one character fitted behind the reopened tags: continue without them.
            stack.clear();
            continue;
        }
        html.push_str(&closing(&stack));
        parts.push(html);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A strict checker of what we produce: only Telegram's tags, properly nested.
    fn assert_valid(part: &str) {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = part;
        while let Some(lt) = rest.find('<') {
            let gt = rest[lt..].find('>').expect("unclosed tag") + lt;
            let tag = &rest[lt + 1..gt];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "misnested in {part:?}");
            } else {
                let name = tag.split_whitespace().next().unwrap().to_string();
                assert!(
                    ["b", "i", "s", "u", "code", "pre", "a", "blockquote"].contains(&name.as_str()),
                    "unknown tag {name}"
                );
                stack.push(name);
            }
            rest = &rest[gt + 1..];
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
                name: "heading",
                markdown: "# Title\n\ntext",
                html: "<b>Title</b>\n\ntext",
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
                name: "table",
                markdown: "|a|b|\n|-|-|\n|1|2|",
                html: "<b>a | b</b>\n1 | 2",
            },
        ];
        for case in cases {
            let parts = render_parts(case.markdown);
            assert_eq!(parts, vec![case.html.to_string()], "case {}", case.name);
            assert_valid(&parts[0]);
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
                "- ",
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
            ]);
            prop::collection::vec(pieces, 0..400).prop_map(|p| p.concat())
        }

        fn squeeze(text: &str) -> String {
            text.chars().filter(|c| !c.is_whitespace()).collect()
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
                for part in render_parts(&text) {
                    prop_assert!(utf16_len(&part) <= TELEGRAM_LIMIT);
                    assert_valid(&part);
                }
            }
        }
    }
}
