//! Reasoning models' thinking is not their answer.
//!
//! Qwen3 and the DeepSeek-R1 distills start an answer with their reasoning in
//! `<think>…</think>`. The user is not shown it, the history does not keep it, and follow-up
//! calls (options, reflection) are not fed it. Only thinking at the start counts: leading
//! `<think>` blocks (one or more, white space around them) are removed, and a `<think>` that is
//! never closed hides everything after it; a `<think>` later in an answer is the model talking
//! about the tag, and stays.
//!
//! [`ThinkFilter`] does this on a stream, piece by piece, holding back only what could still
//! be the start of a tag, so the live display never shows a frame of thinking;
//! [`strip_think`] is the same filter run over a whole answer, so both always agree.
//!
//! ```
//! use heurist::llm::reasoning::strip_think;
//! assert_eq!(strip_think("<think>2+2? four</think>\n\nIt is 4."), "It is 4.");
//! assert_eq!(strip_think("<think>still thinking"), "");
//! assert_eq!(strip_think("Use <think> tags."), "Use <think> tags.");
//! ```

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// The answer without its leading thinking (and without leading white space).
pub fn strip_think(text: &str) -> String {
    let mut filter = ThinkFilter::default();
    let mut answer = filter.push(text);
    answer.push_str(&filter.finish());
    answer
}

/// Removes leading thinking from an answer that arrives in pieces.
#[derive(Debug, Default)]
pub(crate) struct ThinkFilter {
    mode: Mode,
    /// What is not decided yet: white space or part of `<think>` before the answer, or the end
    /// of the thinking that may hold the start of `</think>`. Never longer than a tag plus the
    /// last piece.
    held: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Nothing of the answer was shown yet: a `<think>` may still come.
    #[default]
    Leading,
    /// Inside a leading `<think>` block.
    Thinking,
    /// The answer has begun: everything passes.
    Answer,
}

impl ThinkFilter {
    /// Feeds a piece; returns the part of the answer it makes visible.
    pub(crate) fn push(&mut self, piece: &str) -> String {
        if self.mode == Mode::Answer {
            return piece.to_string();
        }
        self.held.push_str(piece);
        loop {
            match self.mode {
                Mode::Leading => {
                    let start = self.held.len() - self.held.trim_start().len();
                    let rest = &self.held[start..];
                    if rest.is_empty() {
                        self.held.clear();
                        return String::new();
                    }
                    if let Some(after) = rest.strip_prefix(OPEN) {
                        self.held = after.to_string();
                        self.mode = Mode::Thinking;
                        continue;
                    }
                    if OPEN.starts_with(rest) {
                        self.held.drain(..start);
                        return String::new();
                    }
                    self.mode = Mode::Answer;
                    let answer = rest.to_string();
                    self.held.clear();
                    return answer;
                }
                Mode::Thinking => {
                    if let Some(at) = self.held.find(CLOSE) {
                        self.held.drain(..at + CLOSE.len());
                        self.mode = Mode::Leading;
                        continue;
                    }
                    // Keep only what could be the start of a `</think>` split across pieces.
                    let mut cut = self.held.len().saturating_sub(CLOSE.len() - 1);
                    while !self.held.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    self.held.drain(..cut);
                    return String::new();
                }
                Mode::Answer => return String::new(),
            }
        }
    }

    /// At the end of the answer: what was held back and turned out to be answer (a lone
    /// `<thi` is text); unclosed thinking stays hidden.
    pub(crate) fn finish(&mut self) -> String {
        match self.mode {
            Mode::Leading => std::mem::take(&mut self.held),
            Mode::Thinking | Mode::Answer => {
                self.held.clear();
                String::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_cases() {
        struct Case {
            name: &'static str,
            text: &'static str,
            answer: &'static str,
        }
        let cases = [
            Case {
                name: "no thinking",
                text: "Hello",
                answer: "Hello",
            },
            Case {
                name: "one block",
                text: "<think>\nhmm\n</think>\n\nHello",
                answer: "Hello",
            },
            Case {
                name: "two blocks",
                text: " <think>a</think> <think>b</think>Hi",
                answer: "Hi",
            },
            Case {
                name: "unclosed hides the rest",
                text: "<think>I will say Hello",
                answer: "",
            },
            Case {
                name: "a later tag is text",
                text: "Models write <think> first. </think>",
                answer: "Models write <think> first. </think>",
            },
            Case {
                name: "a partial tag at the end is text",
                text: "<thi",
                answer: "<thi",
            },
            Case {
                name: "a lookalike is text",
                text: "<thinking>x",
                answer: "<thinking>x",
            },
            Case {
                name: "only white space",
                text: " \n ",
                answer: "",
            },
            Case {
                name: "multi-byte thinking",
                text: "<think>ééé€</think>ü",
                answer: "ü",
            },
        ];
        for case in cases {
            assert_eq!(strip_think(case.text), case.answer, "case {}", case.name);
        }
    }

    #[test]
    fn a_stream_never_shows_a_frame_of_thinking() {
        let pieces = [
            "<th",
            "ink>The user",
            " wants 4</th",
            "ink>",
            "\n\nIt is ",
            "4.",
        ];
        let mut filter = ThinkFilter::default();
        let shown: Vec<String> = pieces.iter().map(|p| filter.push(p)).collect();
        assert_eq!(shown, ["", "", "", "", "It is ", "4."]);
        assert_eq!(filter.finish(), "");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// However the answer is cut into pieces, the stream shows exactly what the whole
            /// answer shows, and no piece of a closed leading block.
            #[test]
            fn pieces_agree_with_the_whole(
                text in "(<think>|</think>|<th|ink>|</|think|secret|é| |\n|a|b){0,40}",
                cuts in prop::collection::vec(0usize..200, 0..8),
            ) {
                let mut bounds: Vec<usize> = cuts
                    .into_iter()
                    .map(|c| c % (text.len() + 1))
                    .filter(|&c| text.is_char_boundary(c))
                    .collect();
                bounds.push(0);
                bounds.push(text.len());
                bounds.sort_unstable();
                bounds.dedup();
                let mut filter = ThinkFilter::default();
                let mut streamed = String::new();
                for pair in bounds.windows(2) {
                    streamed.push_str(&filter.push(&text[pair[0]..pair[1]]));
                }
                streamed.push_str(&filter.finish());
                prop_assert_eq!(streamed, strip_think(&text));
            }

            #[test]
            fn leading_thinking_never_survives(
                thought in "[a-z <>/\n]{0,40}",
                answer in "[A-Za-z0-9 .,]{0,40}",
            ) {
                prop_assume!(!thought.contains(CLOSE));
                let text = format!("<think>{thought}secret</think>{answer}");
                let stripped = strip_think(&text);
                prop_assert!(!stripped.contains("secret"));
                prop_assert_eq!(stripped, answer.trim_start());
            }
        }
    }
}
