//! The in-memory retrieval index of learned lessons: which ones fit a message, and how well.
//!
//! Built from sled at start and updated as lessons are learned and forgotten, so a turn
//! never reads the whole store. Relevance is Okapi BM25 of the message against a lesson's
//! text. Inverse document frequencies are smoothed as if the store held at least
//! [`MIN_CORPUS`] lessons, so that one distinctive shared term scores about the same in a
//! young store as in a large one (about 3 or more), while a term that many lessons use
//! scores low once the store is large. Only lessons that share a term with the message are
//! scored (through the postings), so retrieval costs what the message's terms touch, not the
//! store.
//!
//! ```
//! use heurist::learning::index::Index;
//! let mut index = Index::default();
//! index.insert(1, "Confirm the time zone before converting meeting times");
//! index.insert(2, "Cite the page you quote from");
//! let hits = index.relevance("convert 3pm Tokyo time for our meeting");
//! assert_eq!(hits.len(), 1);
//! assert_eq!(hits[0].0, 1);
//! assert!(hits[0].1 > 3.0);
//! ```

use std::collections::HashMap;

use super::text::terms;

/// BM25's term-frequency saturation and length normalisation (the usual defaults).
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Inverse document frequencies are computed as if the store held at least this many
/// lessons: in a store of three, every term is "common" by the textbook formula, and a
/// lone lesson would never clear the relevance floor.
pub(crate) const MIN_CORPUS: usize = 50;

struct Doc {
    /// Distinct terms and their counts.
    terms: Vec<(String, u32)>,
    len: u32,
}

/// Lesson ids and their terms.
#[derive(Default)]
pub struct Index {
    docs: HashMap<u64, Doc>,
    /// Term → the lessons that contain it.
    postings: HashMap<String, Vec<u64>>,
    total_len: usize,
}

impl Index {
    /// Adds (or replaces) lesson `id` with `text`.
    pub fn insert(&mut self, id: u64, text: &str) {
        self.remove(id);
        let mut counts: HashMap<String, u32> = HashMap::new();
        for term in terms(text) {
            *counts.entry(term).or_insert(0) += 1;
        }
        let mut doc_terms: Vec<(String, u32)> = counts.into_iter().collect();
        doc_terms.sort();
        let len = doc_terms.iter().map(|(_, n)| n).sum();
        for (term, _) in &doc_terms {
            self.postings.entry(term.clone()).or_default().push(id);
        }
        self.total_len += len as usize;
        self.docs.insert(
            id,
            Doc {
                terms: doc_terms,
                len,
            },
        );
    }

    /// Removes lesson `id`, if indexed.
    pub(crate) fn remove(&mut self, id: u64) {
        let Some(doc) = self.docs.remove(&id) else {
            return;
        };
        self.total_len -= doc.len as usize;
        for (term, _) in doc.terms {
            if let Some(ids) = self.postings.get_mut(&term) {
                ids.retain(|&other| other != id);
                if ids.is_empty() {
                    self.postings.remove(&term);
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.docs.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Every lesson that shares a term with `query`, with its BM25 relevance, in id order
    /// (deterministic: the same index and query give the same list).
    #[allow(clippy::cast_precision_loss)]
    pub fn relevance(&self, query: &str) -> Vec<(u64, f32)> {
        let mut query_terms = terms(query);
        query_terms.sort();
        query_terms.dedup();
        let n = self.docs.len().max(MIN_CORPUS) as f32;
        let average = if self.docs.is_empty() {
            1.0
        } else {
            (self.total_len as f32 / self.docs.len() as f32).max(1.0)
        };
        let idf = |term: &str| {
            let df = self.postings.get(term).map_or(0, Vec::len) as f32;
            ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
        };
        let weight = |doc: &Doc, term: &str, tf: u32| {
            let tf = tf as f32;
            let norm = 1.0 - B + B * doc.len as f32 / average;
            idf(term) * tf * (K1 + 1.0) / (tf + K1 * norm)
        };
        let mut matched: HashMap<u64, f32> = HashMap::new();
        for term in &query_terms {
            for id in self.postings.get(term).into_iter().flatten() {
                let doc = &self.docs[id];
                if let Ok(at) = doc.terms.binary_search_by(|(t, _)| t.as_str().cmp(term)) {
                    *matched.entry(*id).or_insert(0.0) += weight(doc, term, doc.terms[at].1);
                }
            }
        }
        let mut scored: Vec<(u64, f32)> = matched.into_iter().collect();
        scored.sort_by_key(|(id, _)| *id);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_follows_the_terms() {
        struct Case {
            name: &'static str,
            query: &'static str,
            expected: &'static [u64],
        }
        let mut index = Index::default();
        index.insert(1, "Confirm the time zone before converting meeting times");
        index.insert(2, "Quote the page and link the source you fetched");
        index.insert(3, "Keep answers about recipes short: ingredients first");
        let cases = [
            Case {
                name: "shares terms with one",
                query: "What time is 9am Berlin in Tokyo? Which zone?",
                expected: &[1],
            },
            Case {
                name: "stems match (fetching / fetched, sources / source)",
                query: "summarise the sources after fetching them",
                expected: &[2],
            },
            Case {
                name: "nothing fits",
                query: "hello there",
                expected: &[],
            },
            Case {
                name: "stopwords only",
                query: "what is the and of",
                expected: &[],
            },
        ];
        for case in cases {
            let ids: Vec<u64> = index.relevance(case.query).iter().map(|h| h.0).collect();
            assert_eq!(ids, case.expected, "case {}", case.name);
        }
        let full = index.relevance("Confirm the time zone before converting meeting times")[0].1;
        let part = index.relevance("time zone")[0].1;
        let one = index.relevance("zone")[0].1;
        assert!(
            full > part && part > one && one > 2.5,
            "{full} {part} {one}"
        );

        // In a large store, a term many lessons share scores far below a distinctive one.
        let mut large = Index::default();
        for i in 0..2000 {
            large.insert(10 + i, &format!("always check the answer for topic{i}"));
        }
        let generic = large.relevance("check")[0].1;
        let distinctive = large.relevance("topic7")[0].1;
        assert!(
            generic < 0.5 && distinctive > 5.0,
            "{generic} {distinctive}"
        );
    }

    #[test]
    fn insert_and_remove_keep_the_index_consistent() {
        let mut index = Index::default();
        index.insert(1, "alpha beta");
        index.insert(2, "alpha gamma");
        index.insert(1, "delta");
        assert_eq!(index.len(), 2);
        assert_eq!(index.relevance("alpha").len(), 1);
        assert_eq!(index.relevance("delta")[0].0, 1);
        index.remove(2);
        index.remove(2);
        assert!(index.relevance("alpha").is_empty());
        assert!(index.postings.keys().all(|t| t == "delta"));
        index.remove(1);
        assert!(index.is_empty() && index.total_len == 0);
    }
}
