//! The adapter trait every benchmarked engine implements.

use anyhow::Result;

/// One open store, shared by all client threads.
///
/// Adapters open their engine at its shipped defaults: the harness never
/// tunes an engine, and [`Engine::settings`] and [`Engine::durability`]
/// state in the report what the engine runs with.
pub trait Engine: Send + Sync {
    /// The engine's registry name.
    fn name(&self) -> &'static str;

    /// Inserts or overwrites `key` with `value`.
    fn insert(&self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Looks `key` up. When found, copies its value into `buf` (replacing
    /// its contents) and returns `true`; otherwise returns `false`.
    fn get(&self, key: &[u8], buf: &mut Vec<u8>) -> Result<bool>;

    /// Deletes `key`; deleting a missing key is not an error.
    fn remove(&self, key: &[u8]) -> Result<()>;

    /// Inserts many pairs; engines with transactions commit one transaction
    /// per call. The harness calls it with batches of 1,000 pairs.
    fn load_batch(&self, items: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        items.iter().try_for_each(|(k, v)| self.insert(k, v))
    }

    /// Makes every completed write durable.
    fn sync(&self) -> Result<()>;

    /// The configuration the harness opened the engine with.
    fn settings(&self) -> String;

    /// When a completed write becomes durable, at these settings.
    fn durability(&self) -> &'static str;

    /// Closes the store cleanly, making every write durable.
    fn close(self: Box<Self>) -> Result<()>;
}
