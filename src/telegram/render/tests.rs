//! Rendering's tests: valid HTML for hostile input, the limits kept, live frames settled.

use super::html::utf16_len;
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
                "\\", "\\\\", "[a](", "[", "]", "(", ")", "![", "*", "_", "~", "`", "a", " ", "\n",
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
