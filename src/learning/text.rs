//! Words, terms and similarity: the pure text functions learning is built on.
//!
//! ```
//! use heurist::learning::text::{text_similarity, words};
//! assert_eq!(words("Prefer the registry, not GitHub!"), ["prefer", "the", "registry", "not", "github"]);
//! assert!((text_similarity("Check the docs.", "check the DOCS") - 1.0).abs() < f32::EPSILON);
//! ```

use std::collections::HashSet;

/// Lower-cased words with punctuation stripped: every character that is not alphanumeric
/// separates words, so "Docs," and "docs" are the same word.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Word-set Jaccard similarity (shared words over all distinct words), over [`words`], so case and
/// punctuation do not make two identical lessons look different. In `[0, 1]`; two empty
/// texts are identical.
pub fn text_similarity(a: &str, b: &str) -> f32 {
    let a: HashSet<String> = words(a).into_iter().collect();
    let b: HashSet<String> = words(b).into_iter().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let intersection = a.intersection(&b).count();
    let union = a.union(&b).count();
    #[allow(clippy::cast_precision_loss)]
    let similarity = intersection as f32 / union as f32;
    similarity
}

/// Words that say nothing about what a message or a lesson is about: function words
/// (articles, pronouns, auxiliaries, prepositions, conjunctions, quantifiers such as "many" and
/// "much") and the verbs of asking ("tell", "give", "please"). They are in every kind of
/// message: "how many" is in a stock question as much as in "how many days until Christmas".
pub(crate) const STOPWORDS: &[&str] = &[
    "a", "about", "across", "after", "again", "against", "all", "already", "also", "always", "am",
    "an", "and", "any", "anyone", "anything", "are", "as", "at", "be", "because", "been", "before",
    "being", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing",
    "during", "each", "enough", "even", "ever", "every", "everyone", "few", "for", "from", "get",
    "give", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "itself", "just", "know", "let", "like", "make", "many", "maybe",
    "me", "might", "more", "most", "much", "must", "my", "myself", "need", "never", "no", "not",
    "nothing", "now", "of", "often", "on", "one", "only", "or", "other", "our", "out", "own",
    "per", "please", "quite", "really", "right", "same", "say", "says", "several", "shall", "she",
    "should", "since", "so", "some", "someone", "still", "such", "tell", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "though", "through", "to",
    "too", "until", "up", "us", "use", "very", "via", "want", "was", "we", "well", "were", "what",
    "when", "where", "whether", "which", "while", "who", "why", "will", "with", "within",
    "without", "would", "yet", "you", "your", "yourself",
];

/// [`words`] without stopwords and single letters (the "s" of "today's", the "e" of "e.g."),
/// stemmed: the terms BM25 scores.
pub(crate) fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| w.chars().nth(1).is_some() && !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// A light English stemmer, so "converting", "converted" and "converts" are one term with
/// "convert", "sources" one with "source", and "writing" one with "write". Deliberately
/// conservative: only plain suffixes of words long enough that what is left is still a word's
/// stem. British "-ise" spellings are the "-ize" ones ("summarise" is "summarize"); a word both
/// sides spell alike may come out odd ("promize"), which matches all the same.
pub(crate) fn stem(word: &str) -> String {
    // Its s is not a plural (as in the Snowball stemmer).
    if word == "news" {
        return word.to_string();
    }
    let word = american(word);
    let word = word.as_str();
    let n = word.chars().count();
    let cut = |suffix: &str, keep: &str| format!("{}{keep}", &word[..word.len() - suffix.len()]);
    if n > 4 && word.ends_with("ies") {
        return cut("ies", "y");
    }
    // What is left must have four letters or more: "rowing" and "rowed" are not "row".
    if n > 6 && word.ends_with("ing") {
        return with_lost_e(cut("ing", ""));
    }
    if n > 5 && word.ends_with("ed") && !word.ends_with("eed") {
        return with_lost_e(cut("ed", ""));
    }
    if n > 3
        && word.ends_with('s')
        && !(word.ends_with("ss") || word.ends_with("us") || word.ends_with("is"))
    {
        return cut("s", "");
    }
    word.to_string()
}

/// `word` with a British "-ise" ending spelled "-ize".
fn american(word: &str) -> String {
    for (british, american) in [
        ("ising", "izing"),
        ("ised", "ized"),
        ("ises", "izes"),
        ("ise", "ize"),
    ] {
        if let Some(base) = word.strip_suffix(british)
            && base.chars().count() >= 3
        {
            return format!("{base}{american}");
        }
    }
    word.to_string()
}

/// A stem of one syllable that ends in consonant, vowel, consonant lost its e to the suffix:
/// "writ" (of "writing") is "write", "shar" (of "shared") is "share"; "host" and "edit" are not.
fn with_lost_e(stem: String) -> String {
    let vowel = |c: char| "aeiou".contains(c);
    let rest = stem.trim_start_matches(|c: char| c.is_ascii_lowercase() && !vowel(c));
    let mut tail = rest.chars();
    let lost = matches!(
        (tail.next(), tail.next(), tail.next()),
        (Some(v), Some(c), None)
            if vowel(v) && c.is_ascii_lowercase() && !vowel(c) && !"wxy".contains(c)
    );
    if lost { stem + "e" } else { stem }
}

/// Cosine similarity of two vectors (0 for mismatched or zero vectors).
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm =
        a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|y| y * y).sum::<f32>().sqrt();
    if norm == 0.0 { 0.0 } else { dot / norm }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenising() {
        struct Case {
            name: &'static str,
            text: &'static str,
            words: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "punctuation and case",
                text: "Hello, World!",
                words: &["hello", "world"],
            },
            Case {
                name: "non-ascii",
                text: "Grüße, МИР",
                words: &["grüße", "мир"],
            },
            Case {
                name: "hyphens split",
                text: "web-research",
                words: &["web", "research"],
            },
            Case {
                name: "empty",
                text: " ... ",
                words: &[],
            },
        ];
        for case in cases {
            assert_eq!(words(case.text), case.words, "case {}", case.name);
        }
        assert_eq!(terms("What is the time in Tokyo?"), ["time", "tokyo"]);
        assert_eq!(
            terms("How many units are in stock? What's today's date?"),
            ["unit", "stock", "today", "date"],
            "function words and single letters are no terms"
        );
        assert_eq!(
            terms("converting times, fetched sources"),
            ["convert", "time", "fetch", "source"]
        );
    }

    #[test]
    fn stemming_is_conservative() {
        for (word, expected) in [
            ("converting", "convert"),
            ("converted", "convert"),
            ("sources", "source"),
            ("queries", "query"),
            ("class", "class"),
            ("status", "status"),
            ("analysis", "analysis"),
            ("bus", "bus"),
            ("using", "using"),
            ("rowing", "rowing"),
            ("rowed", "rowed"),
            ("rows", "row"),
            ("need", "need"),
            ("agreed", "agreed"),
            ("grüße", "grüße"),
            ("writing", "write"),
            ("write", "write"),
            ("shared", "share"),
            ("closing", "close"),
            ("hosting", "host"),
            ("edited", "edit"),
            ("staying", "stay"),
            ("news", "news"),
            ("summarise", "summarize"),
            ("summarised", "summariz"),
            ("summarized", "summariz"),
            ("rise", "rise"),
        ] {
            assert_eq!(stem(word), expected, "{word}");
        }
    }

    #[test]
    fn jaccard() {
        struct Case {
            name: &'static str,
            a: &'static str,
            b: &'static str,
            expected: f32,
        }
        let cases = [
            Case {
                name: "identical",
                a: "hello world",
                b: "hello world",
                expected: 1.0,
            },
            Case {
                name: "case and punctuation ignored",
                a: "Hello, world.",
                b: "hello world",
                expected: 1.0,
            },
            Case {
                name: "disjoint",
                a: "foo bar",
                b: "baz qux",
                expected: 0.0,
            },
            Case {
                name: "partial",
                a: "hello world",
                b: "hello there",
                expected: 1.0 / 3.0,
            },
            Case {
                name: "both empty",
                a: "",
                b: "",
                expected: 1.0,
            },
            Case {
                name: "one empty",
                a: "x",
                b: "",
                expected: 0.0,
            },
        ];
        for case in cases {
            assert!(
                (text_similarity(case.a, case.b) - case.expected).abs() < 1e-6,
                "case {}",
                case.name
            );
        }
    }

    #[test]
    fn cosine_similarity() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }
}
