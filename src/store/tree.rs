//! [`Tree`]: one of the store's sled trees, every write through the store's write gate.
//!
//! The gate is what makes a backup a point-in-time snapshot of all the trees at once (see
//! `backup.rs`): every write to any tree holds it shared for the length of that one sled call,
//! and a backup holds it exclusively while it reads every tree. sled itself has no snapshot
//! across trees (its `export` reads each tree at a different moment). Reads never touch the
//! gate, so only writers wait, and only while a backup reads.
//!
//! The wrapper forwards the reads the areas use and gates the writes; there is no way to the
//! bare sled tree but [`Tree::raw`], for a sled transaction, taken under [`Tree::writing`].

use std::ops::RangeBounds;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use sled::{CompareAndSwapError, IVec, Iter, Subscriber};

/// The store's write gate: shared by every write, taken whole by a backup.
#[derive(Clone, Default)]
pub(crate) struct Gate(Arc<RwLock<()>>);

impl Gate {
    /// Held while one write runs. Never taken twice by one thread at once: a backup waiting
    /// for the whole gate would block the second one (std's lock lets a waiting writer in
    /// first), so the write calls below take it and nothing they call back takes it again.
    fn write_one(&self) -> RwLockReadGuard<'_, ()> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Held while a backup reads every tree: no write runs meanwhile.
    pub(super) fn hold_all(&self) -> RwLockWriteGuard<'_, ()> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A sled tree of the store whose writes pass the gate. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Tree {
    inner: sled::Tree,
    gate: Gate,
}

impl Tree {
    pub(super) fn new(inner: sled::Tree, gate: Gate) -> Self {
        Self { inner, gate }
    }

    /// The bare tree, for a sled transaction over several trees: the caller holds
    /// [`Tree::writing`] around it.
    pub(super) fn raw(&self) -> &sled::Tree {
        &self.inner
    }

    /// The gate held for a write made through [`Tree::raw`].
    pub(super) fn writing(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.write_one()
    }

    pub(super) fn get<K: AsRef<[u8]>>(&self, key: K) -> sled::Result<Option<IVec>> {
        self.inner.get(key)
    }

    #[cfg(test)]
    pub(super) fn contains_key<K: AsRef<[u8]>>(&self, key: K) -> sled::Result<bool> {
        self.inner.contains_key(key)
    }

    pub(super) fn iter(&self) -> Iter {
        self.inner.iter()
    }

    pub(super) fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        self.inner.range(range)
    }

    pub(super) fn scan_prefix<P: AsRef<[u8]>>(&self, prefix: P) -> Iter {
        self.inner.scan_prefix(prefix)
    }

    pub(super) fn watch_prefix<P: AsRef<[u8]>>(&self, prefix: P) -> Subscriber {
        self.inner.watch_prefix(prefix)
    }

    pub(super) fn last(&self) -> sled::Result<Option<(IVec, IVec)>> {
        self.inner.last()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.inner.len()
    }

    pub(super) fn insert<K, V>(&self, key: K, value: V) -> sled::Result<Option<IVec>>
    where
        K: AsRef<[u8]>,
        V: Into<IVec>,
    {
        let _gate = self.gate.write_one();
        self.inner.insert(key, value)
    }

    pub(super) fn remove<K: AsRef<[u8]>>(&self, key: K) -> sled::Result<Option<IVec>> {
        let _gate = self.gate.write_one();
        self.inner.remove(key)
    }

    pub(super) fn compare_and_swap<K, OV, NV>(
        &self,
        key: K,
        old: Option<OV>,
        new: Option<NV>,
    ) -> sled::Result<Result<(), CompareAndSwapError>>
    where
        K: AsRef<[u8]>,
        OV: AsRef<[u8]>,
        NV: Into<IVec>,
    {
        let _gate = self.gate.write_one();
        self.inner.compare_and_swap(key, old, new)
    }

    /// sled's `fetch_and_update`; `f` must not write to the store (it runs under the gate).
    pub(super) fn fetch_and_update<K, V, F>(&self, key: K, f: F) -> sled::Result<Option<IVec>>
    where
        K: AsRef<[u8]>,
        F: FnMut(Option<&[u8]>) -> Option<V>,
        V: Into<IVec>,
    {
        let _gate = self.gate.write_one();
        self.inner.fetch_and_update(key, f)
    }

    /// sled's `update_and_fetch`; `f` must not write to the store (it runs under the gate).
    pub(super) fn update_and_fetch<K, V, F>(&self, key: K, f: F) -> sled::Result<Option<IVec>>
    where
        K: AsRef<[u8]>,
        F: FnMut(Option<&[u8]>) -> Option<V>,
        V: Into<IVec>,
    {
        let _gate = self.gate.write_one();
        self.inner.update_and_fetch(key, f)
    }
}
