//! Readable text from HTML, for `fetch_url`: what a person would read, not the markup.
//!
//! Deliberately small: scripts, styles and other non-content elements are dropped, block
//! elements become line breaks, entities are decoded and white space is folded. The model gets
//! the words of the page at a fraction of the tokens of its HTML.
//!
//! ```
//! use heurist::agent::html_text::html_to_text;
//! let text = html_to_text("<p>Hello&nbsp;<b>world</b></p><script>x()</script><p>Bye</p>");
//! assert_eq!(text, "Hello world\nBye");
//! ```

/// Elements whose whole content is dropped.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "head",
];

/// Elements that start a new line.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "blockquote",
    "pre",
    "hr",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "title",
    "body",
];

/// Converts an HTML document to plain text (the `<title>` first, if any).
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    if let Some(title) = element_text(html, "title") {
        out.push_str(&title);
        out.push('\n');
    }
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        push_text(&mut out, &rest[..lt]);
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else {
            rest = "";
            break;
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name = tag_name(tag);
        if !closing && SKIPPED.contains(&name.as_str()) && !tag.ends_with('/') {
            rest = skip_element(rest, &name);
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            out.push('\n');
        } else if matches!(name.as_str(), "td" | "th") {
            out.push(' ');
        }
    }
    push_text(&mut out, rest);
    fold_whitespace(&out)
}

fn tag_name(tag: &str) -> String {
    tag.trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Skips to just after `</name>`, case-insensitively; to the end if it never closes.
fn skip_element<'a>(rest: &'a str, name: &str) -> &'a str {
    let closing = format!("</{name}");
    let lower = rest.to_ascii_lowercase();
    match lower.find(&closing) {
        Some(at) => {
            let after = &rest[at..];
            after.find('>').map_or("", |gt| &after[gt + 1..])
        }
        None => "",
    }
}

fn element_text(html: &str, name: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find(&format!("<{name}"))?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find(&format!("</{name}"))?;
    let text = fold_whitespace(&decode_entities(&html[start..end]));
    (!text.is_empty()).then_some(text)
}

fn push_text(out: &mut String, text: &str) {
    if !text.is_empty() {
        out.push_str(&decode_entities(text));
    }
}

/// Decodes the named entities pages commonly use and every numeric one.
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest[1..]
            .find(';')
            .filter(|&semi| semi <= 10)
            .and_then(|semi| decode_entity(&rest[1..semi + 1]).map(|c| (c, semi + 2)));
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn decode_entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "laquo" => '«',
        "raquo" => '»',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "euro" => '€',
        "rsquo" => '’',
        "lsquo" => '‘',
        "rdquo" => '”',
        "ldquo" => '“',
        _ => return None,
    })
}

/// One space between words, at most one blank line between blocks, no edge white space.
fn fold_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_lines = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            blank_lines += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_lines > 1 { "\n\n" } else { "\n" });
        }
        blank_lines = 0;
        out.push_str(&words.join(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_cases() {
        struct Case {
            name: &'static str,
            html: &'static str,
            text: &'static str,
        }
        let cases = [
            Case {
                name: "title first, head dropped",
                html: "<html><head><title>T &amp; U</title><style>p{}</style></head><body><h1>Hi</h1></body>",
                text: "T & U\n\nHi",
            },
            Case {
                name: "scripts and comments",
                html: "a<!-- x -->b<SCRIPT>if (a<b) {}</SCRIPT>c",
                text: "abc",
            },
            Case {
                name: "numeric entities",
                html: "&#65;&#x42;&#X43; &bogus; & fine",
                text: "ABC &bogus; & fine",
            },
            Case {
                name: "unclosed tag does not loop",
                html: "text <b",
                text: "text",
            },
            Case {
                name: "table cells",
                html: "<table><tr><td>a</td><td>b</td></tr></table>",
                text: "a b",
            },
        ];
        for case in cases {
            assert_eq!(html_to_text(case.html), case.text, "case {}", case.name);
        }
    }
}
