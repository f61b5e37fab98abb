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
///
/// One forward pass: every search starts where the previous one ended, so the work is linear
/// in the page's size whatever the page holds (a hostile page with 200,000 `<script>`s
/// converts in about the time it takes to read it). Pages can be megabytes: the agent runs
/// this on a blocking thread, off the runtime's workers.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    if let Some(title) = element_text(html, "title") {
        out.push_str(&title);
        out.push('\n');
    }
    let mut pos = 0;
    while let Some(lt) = find_from(html, pos, "<") {
        push_text(&mut out, &html[pos..lt]);
        if html[lt..].starts_with("<!--") {
            pos = find_from(html, lt + 4, "-->").map_or(html.len(), |end| end + 3);
            continue;
        }
        let Some(gt) = find_from(html, lt, ">") else {
            pos = html.len();
            break;
        };
        let tag = &html[lt + 1..gt];
        pos = gt + 1;
        let closing = tag.starts_with('/');
        let name = tag_name(tag);
        if !closing && SKIPPED.contains(&name.as_str()) && !tag.ends_with('/') {
            pos = skip_element(html, pos, &name);
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            out.push('\n');
        } else if matches!(name.as_str(), "td" | "th") {
            out.push(' ');
        }
    }
    push_text(&mut out, &html[pos..]);
    fold_whitespace(&out)
}

fn tag_name(tag: &str) -> String {
    tag.trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Where `needle` next occurs in `html` at or after `from`.
fn find_from(html: &str, from: usize, needle: &str) -> Option<usize> {
    let found = html[from..].find(needle).map(|at| from + at);
    count_scanned(found.map_or(html.len(), |at| at + needle.len()) - from);
    found
}

/// Where `<name` or `</name` (as `prefix` gives it: `"<"` or `"</"`) next occurs at or after
/// `from`, ignoring ASCII case, without copying the page.
fn find_tag_from(html: &str, mut from: usize, prefix: &str, name: &str) -> Option<usize> {
    while let Some(at) = find_from(html, from, prefix) {
        let after = at + prefix.len();
        let candidate = html.as_bytes().get(after..after + name.len());
        if candidate.is_some_and(|c| c.eq_ignore_ascii_case(name.as_bytes())) {
            return Some(at);
        }
        from = after;
    }
    None
}

/// The position just after `</name>` at or after `from`, ignoring case; the end of the page
/// if the element never closes.
fn skip_element(html: &str, from: usize, name: &str) -> usize {
    find_tag_from(html, from, "</", name)
        .and_then(|at| find_from(html, at, ">"))
        .map_or(html.len(), |gt| gt + 1)
}

fn element_text(html: &str, name: &str) -> Option<String> {
    let open = find_tag_from(html, 0, "<", name)?;
    let start = find_from(html, open, ">")? + 1;
    let end = find_tag_from(html, start, "</", name)?;
    let text = fold_whitespace(&decode_entities(&html[start..end]));
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
thread_local! {
    /// Bytes the searches of this thread looked at: the tests count work, not time.
    static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Records that a search looked at `bytes` bytes (only tests keep count).
fn count_scanned(bytes: usize) {
    #[cfg(test)]
    SCANNED.with(|scanned| scanned.set(scanned.get() + bytes));
    #[cfg(not(test))]
    let _ = bytes;
}

fn push_text(out: &mut String, text: &str) {
    if !text.is_empty() {
        out.push_str(&decode_entities(text));
    }
}

/// Decodes the named entities pages commonly use and every numeric one.
pub(crate) fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // Entity names are short: look for the `;` in the next few bytes only, so a page
        // full of `&` costs no more than its length.
        let window = &rest.as_bytes()[1..rest.len().min(12)];
        let decoded = window
            .iter()
            .position(|&b| b == b';')
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

    /// Converts `html`, returning the text and the bytes its searches looked at.
    fn convert_counting(html: &str) -> (String, usize) {
        SCANNED.with(|scanned| scanned.set(0));
        let text = html_to_text(html);
        (text, SCANNED.with(|scanned| scanned.get()))
    }

    /// The work bound: every byte is looked at a few times at most (text, tags, title search).
    fn linear_bound(html: &str) -> usize {
        4 * html.len() + 64
    }

    #[test]
    fn hostile_pages_cost_linear_work() {
        struct Case {
            name: &'static str,
            unit: &'static str,
        }
        let cases = [
            Case {
                name: "closed scripts",
                unit: "<script>x()</script>a",
            },
            Case {
                name: "unclosed scripts",
                unit: "<script>",
            },
            Case {
                name: "scripts closed with another case",
                unit: "<SCRIPT>a</Script >",
            },
            Case {
                name: "near-miss closings",
                unit: "<style></styl</sty>",
            },
            Case {
                name: "ampersands",
                unit: "&&amp;&#",
            },
            Case {
                name: "unclosed comments",
                unit: "<!--",
            },
            Case {
                name: "titles",
                unit: "<title><title>",
            },
        ];
        for case in cases {
            let html = case.unit.repeat(200_000 / case.unit.len());
            let (_, work) = convert_counting(&html);
            assert!(
                work <= linear_bound(&html),
                "case {}: {work} bytes looked at for a {} byte page",
                case.name,
                html.len()
            );
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            #[test]
            fn any_text_converts_without_panic(html in "(<|>|/|!--|-->|&|;|#x|script|title|SCRIPT|p|é|\\n| |a){0,200}") {
                let text = html_to_text(&html);
                prop_assert!(text.len() <= html.len() * 4 + 8);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(24))]

            /// Repeated hostile fragments, up to a few hundred kilobytes: the work stays linear.
            #[test]
            fn work_is_linear_in_the_page(
                units in prop::collection::vec("(<script>|</script>|<script|</scr|<style>|<!--|-->|<title>|</title>|<|>|&|&#1;|x|é)", 1..8),
                repeat in 1usize..20_000,
            ) {
                let html = units.concat().repeat(repeat);
                let (_, work) = convert_counting(&html);
                prop_assert!(work <= linear_bound(&html), "{} bytes looked at for {} bytes", work, html.len());
            }
        }
    }
}
