//! Tables, which Telegram cannot show: drawn as an aligned monospace block when they fit a
//! phone's width, else as one bullet per row.

use pulldown_cmark::Alignment;

use super::Tok;
use super::{Table, Tokenizer};

/// Widest table row, in characters, drawn as an aligned monospace block; wider tables would
/// wrap on a phone, so they become one bullet per row.
const MAX_TABLE_WIDTH: usize = 40;

/// Columns of an aligned table are this far apart.
const COLUMN_GAP: &str = "  ";

impl Tokenizer {
    /// Lays a table out: an aligned monospace block when its rows fit a phone's width, else one
    /// bullet per row ("• Header: value · Header: value"), which keeps the cells' markup.
    pub(super) fn lay_out_table(&mut self, table: Table) {
        let plain: Vec<Vec<String>> = table
            .rows
            .iter()
            .map(|row| row.iter().map(|cell| cell_text(cell)).collect())
            .collect();
        let widths = column_widths(&plain);
        let width =
            widths.iter().sum::<usize>() + COLUMN_GAP.len() * widths.len().saturating_sub(1);
        if width == 0 {
            return;
        }
        if width <= MAX_TABLE_WIDTH {
            self.lay_out_monospace(&plain, &widths, &table.alignments, width);
        } else {
            self.lay_out_bullets(table.rows);
        }
    }

    /// A table that fits a phone's width: aligned columns in `<pre>`, a rule under the header.
    fn lay_out_monospace(
        &mut self,
        plain: &[Vec<String>],
        widths: &[usize],
        alignments: &[Alignment],
        width: usize,
    ) {
        self.open("<pre>", "</pre>");
        for (i, row) in plain.iter().enumerate() {
            if i > 0 {
                self.toks.push(Tok::Newline);
            }
            let line: Vec<String> = (0..widths.len())
                .map(|c| {
                    let cell = row.get(c).map_or("", String::as_str);
                    let alignment = alignments.get(c).copied();
                    pad(cell, widths[c], alignment.unwrap_or(Alignment::None))
                })
                .collect();
            self.text(line.join(COLUMN_GAP).trim_end());
            if i == 0 {
                self.toks.push(Tok::Newline);
                self.text(&"─".repeat(width));
            }
        }
        self.close();
    }

    /// A table too wide for a phone: one bullet per row ("• Header: value · Header: value"),
    /// which keeps the cells' markup; a table of only a header lists its names.
    fn lay_out_bullets(&mut self, rows: Vec<Vec<Vec<Tok>>>) {
        let mut rows = rows.into_iter();
        let header: Vec<String> = rows
            .next()
            .map(|row| row.iter().map(|cell| cell_text(cell)).collect())
            .unwrap_or_default();
        let body: Vec<Vec<Vec<Tok>>> = rows.collect();
        if body.is_empty() {
            let names: Vec<&str> = header
                .iter()
                .map(String::as_str)
                .filter(|h| !h.is_empty())
                .collect();
            self.text(&format!("• {}", names.join(" · ")));
            return;
        }
        for (i, row) in body.into_iter().enumerate() {
            if i > 0 {
                self.toks.push(Tok::Newline);
            }
            self.text("• ");
            let mut first = true;
            for (c, cell) in row.into_iter().enumerate() {
                if cell_text(&cell).is_empty() {
                    continue;
                }
                if !first {
                    self.text(" · ");
                }
                first = false;
                if let Some(name) = header.get(c).filter(|h| !h.is_empty()) {
                    self.text(&format!("{name}: "));
                }
                self.toks.extend(cell.into_iter().map(|t| match t {
                    Tok::Newline => Tok::Text(" ".to_string()),
                    other => other,
                }));
            }
        }
    }
}

/// The width of each column of `plain`, in characters: its widest cell.
fn column_widths(plain: &[Vec<String>]) -> Vec<usize> {
    let columns = plain.iter().map(Vec::len).max().unwrap_or(0);
    (0..columns)
        .map(|c| {
            plain
                .iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// A cell's visible text on one line (inline markup dropped, as a monospace block needs).
fn cell_text(cell: &[Tok]) -> String {
    let text: String = cell
        .iter()
        .filter_map(|t| match t {
            Tok::Text(text) => Some(text.as_str()),
            Tok::Newline => Some(" "),
            _ => None,
        })
        .collect();
    text.trim().to_string()
}

/// `cell` padded with spaces to `width` characters as its column is aligned.
fn pad(cell: &str, width: usize, alignment: Alignment) -> String {
    let missing = width.saturating_sub(cell.chars().count());
    let (left, right) = match alignment {
        Alignment::Right => (missing, 0),
        Alignment::Center => (missing / 2, missing - missing / 2),
        Alignment::None | Alignment::Left => (0, missing),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}
