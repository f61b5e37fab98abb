//! The model's Markdown as Telegram HTML, split into messages Telegram accepts.
//!
//! Rendering parses Markdown with pulldown-cmark into a flat token stream (open tag, close tag,
//! text, newline) using only the tags Telegram's HTML mode knows, with `&`, `<`, `>` and `"`
//! escaped. Telegram has no headings, lists or tables, so they are drawn: h1 bold underlined,
//! h2 bold, deeper ones bold italic; each list item on its own line, nested ones indented;
//! a table as an aligned monospace block, or one bullet per row when it is too wide for a
//! phone. Splitting then packs tokens into parts of at most [`TELEGRAM_LIMIT`] UTF-16 code
//! units of *HTML source* (stricter than Telegram's limit on visible text, so a part can never
//! be refused for length). A part ends at the best break point available: a paragraph break,
//! else a line break, else a space, else any character boundary. Tags open at the cut are closed
//! at the end of the part and reopened at the start of the next, so a code block split in two is
//! two valid code blocks.
//!
//! Live frames of an answer still streaming go through [`render_partial`], which holds back
//! markup whose end has not arrived yet.
//!
//! The rooms: `markdown` walks the Markdown into tokens (and `markdown/table` draws tables),
//! `split` writes the tokens as HTML parts, `live` finds the settled prefix of a live frame;
//! `html` holds the token and the escaping they share; this file, the public functions.
//!
//! ```
//! use heurist::telegram::render::render_parts;
//! let parts = render_parts("**Hi** <you> & `code`");
//! assert_eq!(parts, vec!["<b>Hi</b> &lt;you&gt; &amp; <code>code</code>".to_string()]);
//! ```

mod html;
mod live;
mod markdown;
mod split;
#[cfg(test)]
mod tests;

pub(crate) use html::escape_html;
pub use html::html_to_plain;
use live::settled;
use markdown::tokens;
use split::split;

/// Telegram's maximum message length, in UTF-16 code units.
pub(crate) const TELEGRAM_LIMIT: usize = 4096;

/// Renders Markdown into Telegram HTML parts of at most [`TELEGRAM_LIMIT`] UTF-16 units.
pub fn render_parts(markdown: &str) -> Vec<String> {
    render_parts_with_limit(markdown, TELEGRAM_LIMIT)
}

/// [`render_parts`] with another limit (tests use small ones).
pub(crate) fn render_parts_with_limit(markdown: &str, limit: usize) -> Vec<String> {
    split(&tokens(markdown), limit)
        .into_iter()
        .filter(|part| !html_to_plain(part).trim().is_empty())
        .collect()
}

/// Renders a live frame of an answer still being written: the Markdown so far, with markup
/// whose end has not arrived held back, so the screen never shows a raw `**`, `` ` `` or
/// `[text](ur`. The held-back text appears once its markup is closed (or its block ends); an
/// unclosed code fence shows as a code block of what is there.
///
/// ```
/// use heurist::telegram::render::render_partial;
/// assert_eq!(render_partial("Paris is **the cap"), vec!["Paris is".to_string()]);
/// assert_eq!(render_partial("Paris is **the capital**"), vec!["Paris is <b>the capital</b>".to_string()]);
/// ```
pub fn render_partial(markdown: &str) -> Vec<String> {
    render_parts(settled(markdown))
}
