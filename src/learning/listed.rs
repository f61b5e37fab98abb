//! A list the model wrote as one lesson, read as its items. Qwen2.5-Coder-1.5B, asked again
//! for JSON after a reflection in prose (the benefit benchmark, one chat, seed 14), put its
//! whole list in one lesson: "To extract transferable heuristics for future similar tasks,
//! consider the following:\n1. When a task involves shipping a parcel, … (e.g., 300 g) is
//! required.\n2. Always check the availability of tools …\n3. Learn from previous failures
//! …". Stored whole, the one concrete item carried two items of general advice past the
//! gates; read as items, each is judged on its own.

use super::quality::specificity;

/// The lessons in `text` if it is a list (two items or more), else `None`. An item is a line
/// that starts with a marker (`1.`, `2)`, `-`, `*`, `+`, `•`) and some text; the lines right
/// after it, up to a blank line or the next item, continue it. Lines that are no item form
/// paragraphs: one that ends in `:` introduces the items after it, and is put in front of
/// each when it names something concrete ("When calling desk__shipping_quote:"), or dropped
/// when it does not ("… consider the following:"); any other paragraph is a lesson of its
/// own.
pub(crate) fn items(text: &str) -> Option<Vec<String>> {
    let segments = segments(text);
    let listed = segments.iter().filter(|s| s.item).count();
    if listed < 2 {
        return None;
    }
    let mut lessons = Vec::new();
    let mut intro: Option<&str> = None;
    for segment in &segments {
        let text = segment.text.as_str();
        if segment.item {
            lessons.push(match intro {
                Some(intro) => format!("{intro} {text}"),
                None => text.to_string(),
            });
        } else if text.ends_with(':') {
            intro = (specificity(text) >= 1.0).then_some(text);
        } else {
            intro = None;
            lessons.push(text.to_string());
        }
    }
    Some(lessons)
}

/// An item or a paragraph of a text, its lines joined by spaces.
struct Segment {
    item: bool,
    text: String,
}

/// `text`'s items and paragraphs, in order.
fn segments(text: &str) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut open = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            open = false;
        } else if let Some(item) = list_item(line) {
            segments.push(Segment {
                item: true,
                text: item.to_string(),
            });
            open = true;
        } else if open && let Some(last) = segments.last_mut() {
            last.text.push(' ');
            last.text.push_str(line);
        } else {
            segments.push(Segment {
                item: false,
                text: line.to_string(),
            });
            open = true;
        }
    }
    segments
}

/// The text of a list item ("1. …", "2) …", "- …", "* …", "+ …", "• …"), without its
/// marker: a marker, then white space, then text with a letter or digit ("* * *" is a rule,
/// "-5 °C" and "2026.12.14" are no items).
fn list_item(line: &str) -> Option<&str> {
    let rest = match line.strip_prefix(['-', '*', '+', '\u{2022}']) {
        Some(rest) => rest,
        None => {
            let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if !(1..=2).contains(&digits) {
                return None;
            }
            line[digits..].strip_prefix(['.', ')'])?
        }
    };
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let item = rest.trim();
    item.chars().any(char::is_alphanumeric).then_some(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_written_as_one_lesson_is_its_items() {
        // Qwen2.5-Coder-1.5B's reflection, word for word (the benefit benchmark, one chat,
        // seed 14): stored whole, it carried two items of general advice.
        let qwen = "To extract transferable heuristics for future similar tasks, consider the \
            following:\n1. When a task involves shipping a parcel, ensure the correct weight is \
            used, as whole grams with no unit (e.g., 300 g) is required.\n2. Always check the \
            availability of tools or resources to provide accurate information.\n3. Learn from \
            previous failures and use them to improve future queries.";
        assert_eq!(
            items(qwen).unwrap(),
            [
                "When a task involves shipping a parcel, ensure the correct weight is used, as \
                 whole grams with no unit (e.g., 300 g) is required.",
                "Always check the availability of tools or resources to provide accurate \
                 information.",
                "Learn from previous failures and use them to improve future queries.",
            ]
        );
        let cases: [(&str, &[&str]); 7] = [
            (
                "- Write TCK-004411.\n*\tDates as 14.12.2026,\n  day first.",
                &["Write TCK-004411.", "Dates as 14.12.2026, day first."],
            ),
            // A paragraph after the list is no part of its last item.
            (
                "1. Always verify ids.\n2. Write 300 for 0.3 kg.\n\nAlso be careful.",
                &[
                    "Always verify ids.",
                    "Write 300 for 0.3 kg.",
                    "Also be careful.",
                ],
            ),
            // An introduction that names something concrete stays in front of each item.
            (
                "When calling desk__shipping_quote:\n- weight in grams, e.g. 1500\n+ never kg",
                &[
                    "When calling desk__shipping_quote: weight in grams, e.g. 1500",
                    "When calling desk__shipping_quote: never kg",
                ],
            ),
            // A wrapped paragraph is one; one that ends in `:` introduces, and without anything
            // concrete it goes; a blank line ends a paragraph.
            (
                "Weights are whole\ngrams.\nTips:\n1) Write 1500 for 1.5 kg.\n2) Write 300.",
                &["Write 1500 for 1.5 kg.", "Write 300."],
            ),
            (
                "Weights are whole grams.\n\nTips:\n1) Write 1500 for 1.5 kg.\n2) Write 300.",
                &[
                    "Weights are whole grams.",
                    "Write 1500 for 1.5 kg.",
                    "Write 300.",
                ],
            ),
            (
                "1. For tickets:\n   - write TCK-004411\n2. For dates: 14.12.2026",
                &["For tickets:", "write TCK-004411", "For dates: 14.12.2026"],
            ),
            ("+ a\n- b", &["a", "b"]),
        ];
        for (text, expected) in cases {
            assert_eq!(items(text).unwrap(), expected, "{text:?}");
        }
    }

    #[test]
    fn a_lesson_with_one_item_or_none_is_no_list() {
        for text in [
            "When calling desk__ticket, write TCK- and six digits.",
            "Tips:\n1. Write TCK-004411.",
            "Write 1500\ngrams for 1.5 kg.",
            "1500 grams is 1.5 kg.\n-5 °C is cold.\n2026.12.14 is a date.",
            "* * *\n- - -",
            "1.5 kg\n2.5 kg",
        ] {
            assert!(items(text).is_none(), "{text:?}");
        }
    }
}
