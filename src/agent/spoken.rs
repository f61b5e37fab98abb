//! An answer as a person would say it, for spoken replies: the words without Markdown's
//! markers, a code block or a table said to be in the message rather than read out, a link
//! said by its title, and capped at a number of characters, cut at a sentence where one ends
//! late enough (the text message always carries the whole answer).
//!
//! Pure: one pass over the lines, then one over the characters of each.
//!
//! ```
//! use heurist::agent::spoken::spoken;
//! assert_eq!(
//!     spoken("**Paris** is the capital, see [the atlas](https://atlas.example).", 100),
//!     "Paris is the capital, see the atlas."
//! );
//! ```

/// What is said in place of a code block.
pub const CODE_SAID: &str = "The code is in the message.";

/// What is said in place of a table.
pub const TABLE_SAID: &str = "The table is in the message.";

/// What is said after an answer cut at the cap.
pub const REST_SAID: &str = "The rest is in the message.";

/// `markdown` as it is spoken, at most `max_chars` characters before [`REST_SAID`] (added
/// when something was cut); empty when nothing is left to say.
pub fn spoken(markdown: &str, max_chars: usize) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut in_code = false;
    let mut in_table = false;
    for line in markdown.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            if !in_code {
                said.push(CODE_SAID.to_string());
            }
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let table_row = trimmed.starts_with('|');
        if table_row && !in_table {
            said.push(TABLE_SAID.to_string());
        }
        in_table = table_row;
        if table_row {
            continue;
        }
        let words = plain(strip_line_marker(trimmed));
        if !words.is_empty() {
            said.push(words);
        }
    }
    capped(&said.join(" "), max_chars)
}

/// `line` without its heading, quote or list marker.
fn strip_line_marker(line: &str) -> &str {
    let line = line
        .trim_start_matches('#')
        .trim_start_matches('>')
        .trim_start();
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return rest;
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    match line[digits..].strip_prefix(". ") {
        Some(rest) if digits > 0 => rest,
        _ => line,
    }
}

/// `text` without inline markers: emphasis and code markers dropped, `[title](url)` and
/// `![alt](url)` said by their title, a bare URL said as "a link", whitespace collapsed.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some((title, after)) = link(rest) {
            out.push_str(title);
            rest = after;
            continue;
        }
        if rest.starts_with("http://") || rest.starts_with("https://") {
            out.push_str("a link");
            rest = rest.trim_start_matches(|c: char| !c.is_whitespace());
            continue;
        }
        match c {
            '*' | '`' | '~' => {}
            '_' if rest.starts_with("__") => {
                rest = &rest[1..];
            }
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A Markdown link (or image) at the start of `text`: its title and what follows it.
fn link(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('!').unwrap_or(text);
    let inner = text.strip_prefix('[')?;
    let close = inner.find("](")?;
    let after = &inner[close + 2..];
    let end = after.find(')')?;
    Some((&inner[..close], &after[end + 1..]))
}

/// `text` cut to `max_chars` characters: at the last sentence end in the second half of
/// them, else at the last space, then [`REST_SAID`].
fn capped(text: &str, max_chars: usize) -> String {
    let Some((cut_at, _)) = text.char_indices().nth(max_chars) else {
        return text.to_string();
    };
    let head = &text[..cut_at];
    let sentence = head
        .rfind(['.', '!', '?'])
        .filter(|&at| head[..at].chars().count() >= max_chars / 2)
        .map(|at| at + 1);
    let end = sentence.or_else(|| head.rfind(' ')).unwrap_or(cut_at);
    let head = head[..end].trim_end();
    if head.is_empty() {
        return REST_SAID.to_string();
    }
    format!("{head} {REST_SAID}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_said_as_a_person_says_it() {
        let cases = [
            ("plain", "Paris.", 100, "Paris."),
            (
                "emphasis and inline code",
                "It is **very** _big_ and `grep` finds it.",
                100,
                "It is very _big_ and grep finds it.",
            ),
            (
                "a heading, a list, a quote",
                "# Steps\n- first\n2. second\n> quoted",
                100,
                "Steps first second quoted",
            ),
            (
                "a code block",
                "Run this:\n```sh\nrm -rf /tmp/x\n```\nThen wait.",
                100,
                "Run this: The code is in the message. Then wait.",
            ),
            (
                "a table",
                "Prices:\n| a | b |\n|---|---|\n| 1 | 2 |\nCheap.",
                100,
                "Prices: The table is in the message. Cheap.",
            ),
            (
                "links by their titles, bare URLs as a link",
                "See [the docs](https://x.example/a) or https://y.example/b now.",
                100,
                "See the docs or a link now.",
            ),
            (
                "cut at a sentence",
                "One two three. Four five six seven.",
                20,
                "One two three. The rest is in the message.",
            ),
            (
                "cut at a space when no sentence ends late enough",
                "Onetwothree four five six seven",
                20,
                "Onetwothree four The rest is in the message.",
            ),
            (
                "only code",
                "```\nx\n```",
                100,
                "The code is in the message.",
            ),
            ("nothing", "  ", 100, ""),
        ];
        for (name, markdown, max, want) in cases {
            assert_eq!(spoken(markdown, max), want, "{name}");
        }
    }
}
