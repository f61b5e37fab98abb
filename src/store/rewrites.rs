//! The `rewrites` tree: what the bot learned of the form a tool wants one argument in (see
//! `learning::rewrite`). Key `tool ‖ 0x00 ‖ argument`, value a JSON [`TaughtForm`]: the
//! examples the tool gave (newest first, a few), and how the calls the bot rewrote went, so a
//! rewrite that keeps failing is retired. Every change is one compare-and-swap.

use serde::{Deserialize, Serialize};

use super::db::Store;
use super::error::Result;
use super::records::decode_json;
use super::tree::Tree;

const TREE: &str = "rewrites";

/// Rewritten calls that failed one after the other that retire a form's rewrite (until the
/// tool teaches a new example).
pub const MAX_FAILURES_IN_A_ROW: u32 = 2;

/// One value the tool refused (or stated as an example's input), and the form it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewriteExample {
    pub from: String,
    pub to: String,
}

impl RewriteExample {
    #[must_use]
    pub fn new(from: &str, to: &str) -> Self {
        Self {
            from: from.to_string(),
            to: to.to_string(),
        }
    }
}

/// What one argument of one tool was taught.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaughtForm {
    /// Newest first.
    pub examples: Vec<RewriteExample>,
    /// Rewritten calls that the tool took.
    pub worked: u32,
    /// Rewritten calls that failed since the last that worked (or since a new example).
    pub failed_in_a_row: u32,
    /// Unix seconds of the last change.
    pub changed: i64,
}

impl TaughtForm {
    /// Whether calls are still rewritten to this form.
    #[must_use]
    pub fn active(&self) -> bool {
        self.failed_in_a_row < MAX_FAILURES_IN_A_ROW && !self.examples.is_empty()
    }
}

/// The learned argument forms (tree `rewrites`): [`Store::rewrites`]. A borrowed view.
#[derive(Clone, Copy)]
pub struct Rewrites<'s> {
    store: &'s Store,
}

impl Store {
    /// The argument forms tools taught.
    pub fn rewrites(&self) -> Rewrites<'_> {
        Rewrites { store: self }
    }
}

fn key(tool: &str, argument: &str) -> Vec<u8> {
    let mut key = tool.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(argument.as_bytes());
    key
}

impl Rewrites<'_> {
    fn tree(&self) -> Result<Tree> {
        self.store.tree(TREE)
    }

    /// Every argument of `tool` with a form taught, by argument name (unreadable records
    /// skipped with a warning).
    pub fn of_tool(&self, tool: &str) -> Result<Vec<(String, TaughtForm)>> {
        let mut prefix = tool.as_bytes().to_vec();
        prefix.push(0);
        let mut forms = Vec::new();
        for entry in self.tree()?.scan_prefix(&prefix) {
            let (k, v) = entry?;
            let argument = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            if let Some(form) = decode_json::<TaughtForm>(TREE, &k, &v) {
                forms.push((argument, form));
            }
        }
        Ok(forms)
    }

    /// Changes one argument's form with `change`, atomically; a missing record starts
    /// default where `create`, else stays missing.
    pub fn update(
        &self,
        tool: &str,
        argument: &str,
        create: bool,
        change: impl Fn(&mut TaughtForm),
    ) -> Result<()> {
        let now = chrono::Utc::now().timestamp();
        let key = key(tool, argument);
        self.tree()?.fetch_and_update(&key, |old| {
            let mut form = match old {
                None if !create => return None,
                None => TaughtForm::default(),
                Some(bytes) => match decode_json::<TaughtForm>(TREE, &key, bytes) {
                    Some(form) => form,
                    // Unreadable: kept as it is, never written over.
                    None => return Some(bytes.to_vec()),
                },
            };
            change(&mut form);
            form.changed = now;
            serde_json::to_vec(&form)
                .ok()
                .or_else(|| old.map(<[u8]>::to_vec))
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_kept_per_tool_and_argument() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let example = RewriteExample {
            from: "4411".into(),
            to: "SKU-004411".into(),
        };
        store
            .rewrites()
            .update("desk__stock", "sku", true, |f| {
                f.examples.insert(0, example.clone());
            })
            .unwrap();
        store
            .rewrites()
            .update("desk__stock_level", "sku", true, |f| f.worked += 1)
            .unwrap();
        let forms = store.rewrites().of_tool("desk__stock").unwrap();
        assert_eq!(
            forms.len(),
            1,
            "a tool's prefix never meets a longer tool name"
        );
        assert_eq!(forms[0].0, "sku");
        assert_eq!(forms[0].1.examples, vec![example]);
        assert!(forms[0].1.active());
        store
            .rewrites()
            .update("desk__stock", "sku", false, |f| f.failed_in_a_row = 2)
            .unwrap();
        assert!(
            !store.rewrites().of_tool("desk__stock").unwrap()[0]
                .1
                .active()
        );
        store
            .rewrites()
            .update("desk__ticket", "id", false, |f| f.worked += 1)
            .unwrap();
        assert!(store.rewrites().of_tool("desk__ticket").unwrap().is_empty());
    }
}
