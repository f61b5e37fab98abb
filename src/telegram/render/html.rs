//! What the rooms of rendering share: the token the Markdown walk writes and the splitter
//! reads, Telegram HTML's escaping, and the length Telegram measures.

/// One token of rendered Markdown: a tag opened (with the text that closes it), the last open
/// tag closed, escaped text, or a line break.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Open { open: String, close: &'static str },
    Close,
    Text(String),
    Newline,
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

/// Appends `c` to `out`, escaped for Telegram HTML.
pub(super) fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        _ => out.push(c),
    }
}

/// The length of `s` as Telegram counts it: UTF-16 code units.
pub(super) fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}
