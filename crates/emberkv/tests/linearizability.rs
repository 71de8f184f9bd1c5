//! Linearizability of concurrent point operations.
//!
//! Eight threads run `get`, `contains_key`, `insert`, `remove`, `update`,
//! `compare_and_swap` and two-key write batches on twelve keys while the
//! hot tier spills to 1 MiB segment files and compaction copies live
//! records forward (the maintenance thread, and a ninth thread calling
//! `Db::compact` in a loop). Between rounds the store is closed and
//! reopened, alternating `sync_writes`, every other time without its
//! checkpoint so that the log itself is replayed; the history runs on
//! across the reopens.
//!
//! Each operation is stamped at invocation and at response from one
//! `SeqCst` counter: when A's response stamp is below B's invocation stamp,
//! A's effects happen before B starts. Linearizability is local (Herlihy and
//! Wing, 1990): a history is linearizable when the history of each key is,
//! so each key's history is checked on its own against a register model, by
//! a Wing and Gong search with Lowe's memoisation of (operations linearized,
//! register state). Every written value is unique, so a read names the one
//! write it saw. A batch does not change its keys at one instant for
//! readers (see `Db::apply_batch`), so each of its operations is a separate
//! write of its key over the batch's interval.
//!
//! `EMBERKV_LIN_SEED` varies (or reproduces) the operation streams; the
//! interleaving is up to the scheduler.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use emberkv::{Db, Options, WriteBatch};

use checker::{Event, Op};

/// The linearizability checker for one key's history.
mod checker {
    use std::collections::HashSet;

    /// The register: the id of the value the key holds, `None` when absent.
    pub type State = Option<u64>;

    /// One completed operation on one key and what it returned.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Op {
        /// `get` returned the value with this id, or nothing.
        Get(Option<u64>),
        /// `contains_key` returned this.
        Contains(bool),
        /// `insert` (or a batch insert) of the value with this id.
        Insert(u64),
        /// `remove` returned this.
        Remove(bool),
        /// A batch remove, which returns nothing.
        Delete,
        /// `update` whose closure saw `prev` and returned `new`.
        Update { prev: Option<u64>, new: u64 },
        /// `compare_and_swap(expected, new)` returned `swapped`.
        Cas {
            expected: Option<u64>,
            new: Option<u64>,
            swapped: bool,
        },
    }

    impl Op {
        /// The state after this operation runs alone from `state`, or
        /// `None` when it could not have returned what it did.
        pub fn apply(self, state: State) -> Option<State> {
            match self {
                Op::Get(seen) => (seen == state).then_some(state),
                Op::Contains(present) => (present == state.is_some()).then_some(state),
                Op::Insert(id) => Some(Some(id)),
                Op::Remove(was) => (was == state.is_some()).then_some(None),
                Op::Delete => Some(None),
                Op::Update { prev, new } => (prev == state).then_some(Some(new)),
                Op::Cas {
                    expected,
                    new,
                    swapped,
                } => match (expected == state, swapped) {
                    (true, true) => Some(new),
                    (false, false) => Some(state),
                    _ => None,
                },
            }
        }
    }

    /// An operation with its invocation and response stamps.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Event {
        pub call: u64,
        pub ret: u64,
        pub op: Op,
    }

    /// A search node: which operations are linearized, and the state after
    /// them.
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Node {
        /// Every operation before `lo` (in invocation order) is linearized;
        /// operation `lo` is not.
        lo: usize,
        /// Bit `i`: operation `lo + i` is linearized (bit 0 is clear).
        /// No trailing zero words, so equal sets compare equal.
        above: Vec<u64>,
        state: State,
    }

    impl Node {
        fn is_done(&self, i: usize) -> bool {
            let b = i - self.lo;
            self.above
                .get(b / 64)
                .is_some_and(|w| (w >> (b % 64)) & 1 == 1)
        }

        /// This node with operation `i` linearized, leaving `state`.
        fn then(&self, i: usize, state: State) -> Node {
            let b = i - self.lo;
            let mut bits = self.above.clone();
            if bits.len() <= b / 64 {
                bits.resize(b / 64 + 1, 0);
            }
            bits[b / 64] |= 1 << (b % 64);
            let mut run = 0;
            for w in &bits {
                let ones = w.trailing_ones() as usize;
                run += ones;
                if ones < 64 {
                    break;
                }
            }
            Node {
                lo: self.lo + run,
                above: shift_right(&bits, run),
                state,
            }
        }
    }

    fn shift_right(bits: &[u64], by: usize) -> Vec<u64> {
        let (words, rem) = (by / 64, by % 64);
        let mut out: Vec<u64> = (words..bits.len())
            .map(|i| {
                let high = match (rem, bits.get(i + 1)) {
                    (0, _) | (_, None) => 0,
                    (_, Some(next)) => next << (64 - rem),
                };
                (bits[i] >> rem) | high
            })
            .collect();
        while out.last() == Some(&0) {
            out.pop();
        }
        out
    }

    /// More search nodes than this and the check fails rather than run on.
    const MAX_NODES: usize = 2_000_000;

    /// Checks that `events` (one key's complete history) are linearizable
    /// from `initial`: that some total order of them, consistent with real
    /// time (an operation that returned before another was invoked comes
    /// first), is a legal sequential history of a register. Returns the
    /// number of search nodes visited, or a description of the failure.
    pub fn check(initial: State, events: &[Event]) -> Result<usize, String> {
        let mut ops = events.to_vec();
        ops.sort_by_key(|e| (e.call, e.ret));
        let start = Node {
            lo: 0,
            above: Vec::new(),
            state: initial,
        };
        let mut seen = HashSet::from([start.clone()]);
        let mut stack = vec![start];
        let mut deepest = (0, initial);
        while let Some(node) = stack.pop() {
            if node.lo == ops.len() {
                return Ok(seen.len());
            }
            if node.lo > deepest.0 {
                deepest = (node.lo, node.state);
            }
            // Only an operation invoked before the first response among
            // those not linearized yet can be linearized next.
            let mut first_ret = u64::MAX;
            for (i, e) in ops.iter().enumerate().skip(node.lo) {
                if e.call > first_ret {
                    break;
                }
                if !node.is_done(i) {
                    first_ret = first_ret.min(e.ret);
                }
            }
            let next: Vec<usize> = (node.lo..ops.len())
                .take_while(|&i| ops[i].call < first_ret)
                .filter(|&i| !node.is_done(i))
                .collect();
            // Reversed, so that the earliest invoked is tried first.
            for &i in next.iter().rev() {
                if let Some(state) = ops[i].op.apply(node.state) {
                    let child = node.then(i, state);
                    if seen.insert(child.clone()) {
                        stack.push(child);
                    }
                }
            }
            if seen.len() > MAX_NODES {
                return Err(format!(
                    "search gave up after {MAX_NODES} nodes ({} operations)",
                    ops.len()
                ));
            }
        }
        let (lo, state) = deepest;
        let around: Vec<String> = ops[lo.saturating_sub(4)..(lo + 12).min(ops.len())]
            .iter()
            .map(|e| format!("  [{}, {}] {:x?}", e.call, e.ret, e.op))
            .collect();
        Err(format!(
            "not linearizable: of {} operations, at most the first {lo} in invocation order \
             could be linearized (register then {state:x?}), not [{}, {}] {:x?}; around it \
             (value ids in hex):\n{}",
            ops.len(),
            ops[lo].call,
            ops[lo].ret,
            ops[lo].op,
            around.join("\n")
        ))
    }
}

// ------------------------------------------------------- checker's tests

fn ev(call: u64, ret: u64, op: Op) -> Event {
    Event { call, ret, op }
}

fn accepts(events: &[Event]) -> bool {
    checker::check(None, events).is_ok()
}

#[test]
fn checker_accepts_a_sequential_history() {
    assert!(accepts(&[
        ev(1, 2, Op::Get(None)),
        ev(3, 4, Op::Insert(1)),
        ev(5, 6, Op::Get(Some(1))),
        ev(7, 8, Op::Contains(true)),
        ev(
            9,
            10,
            Op::Update {
                prev: Some(1),
                new: 2
            }
        ),
        ev(11, 12, Op::Remove(true)),
        ev(13, 14, Op::Remove(false)),
        ev(15, 16, Op::Contains(false)),
        ev(17, 18, Op::Insert(3)),
        ev(19, 20, Op::Delete),
        ev(21, 22, Op::Get(None)),
    ]));
}

#[test]
fn checker_accepts_reads_of_either_value_during_a_write() {
    let base = [ev(1, 2, Op::Insert(1)), ev(3, 10, Op::Insert(2))];
    for (first, second) in [(Some(1), Some(1)), (Some(1), Some(2)), (Some(2), Some(2))] {
        let mut h = base.to_vec();
        h.push(ev(4, 5, Op::Get(first)));
        h.push(ev(6, 7, Op::Get(second)));
        assert!(accepts(&h), "{first:?} then {second:?}");
    }
    // A read concurrent with the write may also see the new value before
    // an earlier-invoked but overlapping read sees the old one.
    assert!(accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 10, Op::Insert(2)),
        ev(4, 9, Op::Get(Some(1))),
        ev(5, 6, Op::Get(Some(2))),
    ]));
}

#[test]
fn checker_rejects_a_stale_read_after_a_completed_write() {
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 4, Op::Insert(2)),
        ev(5, 6, Op::Get(Some(1))),
    ]));
}

#[test]
fn checker_rejects_an_old_value_after_a_new_one_was_read() {
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 10, Op::Insert(2)),
        ev(4, 5, Op::Get(Some(2))),
        ev(6, 7, Op::Get(Some(1))),
    ]));
}

#[test]
fn checker_rejects_a_read_from_the_future_and_of_a_value_never_written() {
    assert!(!accepts(&[
        ev(1, 2, Op::Get(Some(1))),
        ev(3, 4, Op::Insert(1))
    ]));
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 4, Op::Get(Some(9)))
    ]));
    assert!(!accepts(&[ev(1, 2, Op::Contains(true))]));
}

#[test]
fn checker_rejects_a_lost_update() {
    let updates = |second_prev| {
        vec![
            ev(1, 2, Op::Insert(1)),
            ev(
                3,
                6,
                Op::Update {
                    prev: Some(1),
                    new: 2,
                },
            ),
            ev(
                4,
                7,
                Op::Update {
                    prev: second_prev,
                    new: 3,
                },
            ),
            ev(8, 9, Op::Get(Some(3))),
        ]
    };
    assert!(accepts(&updates(Some(2))));
    assert!(!accepts(&updates(Some(1))), "both updates saw value 1");
}

#[test]
fn checker_rejects_two_successful_removes_of_one_insert() {
    let removes = |second| {
        vec![
            ev(1, 2, Op::Insert(1)),
            ev(3, 6, Op::Remove(true)),
            ev(4, 7, Op::Remove(second)),
        ]
    };
    assert!(accepts(&removes(false)));
    assert!(!accepts(&removes(true)));
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 4, Op::Remove(false))
    ]));
}

#[test]
fn checker_rejects_two_successful_swaps_from_one_value() {
    let swaps = |second| {
        vec![
            ev(1, 2, Op::Insert(1)),
            ev(
                3,
                6,
                Op::Cas {
                    expected: Some(1),
                    new: Some(2),
                    swapped: true,
                },
            ),
            ev(
                4,
                7,
                Op::Cas {
                    expected: Some(1),
                    new: None,
                    swapped: second,
                },
            ),
        ]
    };
    assert!(accepts(&swaps(false)));
    assert!(!accepts(&swaps(true)));
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(
            3,
            4,
            Op::Cas {
                expected: Some(1),
                new: None,
                swapped: false
            }
        ),
    ]));
}

#[test]
fn checker_rejects_a_write_undone_by_a_reopen() {
    // A later round's read must see the last round's final value.
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 4, Op::Insert(2)),
        ev(100, 101, Op::Get(Some(1))),
    ]));
    assert!(!accepts(&[
        ev(1, 2, Op::Insert(1)),
        ev(3, 4, Op::Remove(true)),
        ev(100, 101, Op::Contains(true)),
    ]));
}

/// A small seeded generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mix(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A legal sequential run of `n` random operations from an empty register,
/// each operation's result taken from the model.
fn sequential_ops(rng: &mut Rng, n: usize) -> Vec<Op> {
    let mut state = None;
    let mut ops = Vec::with_capacity(n);
    for id in 1..=n as u64 {
        let op = match rng.below(7) {
            0 => Op::Get(state),
            1 => Op::Contains(state.is_some()),
            2 => Op::Insert(id),
            3 => Op::Remove(state.is_some()),
            4 => Op::Update {
                prev: state,
                new: id,
            },
            5 => Op::Delete,
            _ => {
                let expected = if rng.below(2) == 0 {
                    state
                } else {
                    Some(id - 1)
                };
                Op::Cas {
                    expected,
                    new: (rng.below(4) > 0).then_some(id),
                    swapped: expected == state,
                }
            }
        };
        state = op.apply(state).expect("results from the model");
        ops.push(op);
    }
    ops
}

#[test]
fn checker_accepts_random_histories_that_have_a_linearization() {
    let mut rng = Rng(7);
    for round in 0..200 {
        let n = 20 + rng.below(60);
        let width = 1 + rng.below(80) as u64;
        // Operation k takes effect at 100k; its interval is any around it.
        let history: Vec<Event> = sequential_ops(&mut rng, n)
            .into_iter()
            .enumerate()
            .map(|(k, op)| {
                let at = 1_000 + 100 * k as u64;
                let call = at - 1 - rng.next() % (width * 10);
                let ret = at + 1 + rng.next() % (width * 10);
                ev(call, ret, op)
            })
            .collect();
        if let Err(why) = checker::check(None, &history) {
            panic!("round {round}: {why}");
        }
    }
}

#[test]
fn checker_rejects_every_wrong_result_in_a_sequential_history() {
    let mut rng = Rng(11);
    let ops = sequential_ops(&mut rng, 60);
    let timed = |ops: &[Op]| -> Vec<Event> {
        (0..ops.len() as u64)
            .map(|k| ev(2 * k + 1, 2 * k + 2, ops[k as usize]))
            .collect()
    };
    assert!(accepts(&timed(&ops)));
    let mut wrong = 0;
    for k in 0..ops.len() {
        let bad = match ops[k] {
            Op::Get(None) => Op::Get(Some(1_000)),
            Op::Get(Some(id)) => Op::Get(id.is_multiple_of(2).then_some(id + 1)),
            Op::Contains(c) => Op::Contains(!c),
            Op::Remove(r) => Op::Remove(!r),
            Op::Update { prev, new } => Op::Update {
                prev: prev.map_or(Some(1_000), |_| None),
                new,
            },
            Op::Cas {
                expected,
                new,
                swapped,
            } => Op::Cas {
                expected,
                new,
                swapped: !swapped,
            },
            Op::Insert(_) | Op::Delete => continue,
        };
        let mut mutated = ops.clone();
        mutated[k] = bad;
        assert!(
            !accepts(&timed(&mutated)),
            "operation {k} changed from {:?} to {bad:?} was accepted",
            ops[k]
        );
        wrong += 1;
    }
    assert!(
        wrong > 30,
        "only {wrong} operations had a result to falsify"
    );
}

#[test]
fn checker_handles_a_long_concurrent_history() {
    // 4,000 operations, each overlapping about eight others: the length of
    // the longest key's history in the store test.
    let mut rng = Rng(3);
    let ops = sequential_ops(&mut rng, 4_000);
    let history: Vec<Event> = ops
        .into_iter()
        .enumerate()
        .map(|(k, op)| {
            let at = 100 + 10 * k as u64;
            ev(at - 1 - rng.next() % 40, at + 1 + rng.next() % 40, op)
        })
        .collect();
    let nodes = checker::check(None, &history).unwrap();
    assert!(nodes >= history.len());
}

// ------------------------------------------------------------ the store

const THREADS: usize = 8;
const KEYS: usize = 12;
/// Keys below this take most writes; the others are mostly read, so their
/// records often fall behind the hot tier and are read from segment files.
const HOT_KEYS: usize = 4;
const ROUNDS: usize = 4;
const OPS_PER_THREAD: usize = 1_000;
const HOT_BYTES: usize = 4 << 20;
const DEFAULT_SEED: u64 = 0x5EED_0008;

fn seed() -> u64 {
    std::env::var("EMBERKV_LIN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED)
}

/// Round `round`'s options: the smallest hot tier (four 1 MiB pages) and
/// segments (1 MiB), eager background compaction, and `sync_writes` in
/// odd rounds.
fn options(round: usize) -> Options {
    Options::default()
        .hot_bytes(HOT_BYTES)
        .segment_bytes(1 << 20)
        .compaction_garbage(Some(0.2))
        .flush_interval(Duration::from_millis(10))
        .sync_writes(round % 2 == 1)
}

fn key(k: usize) -> Vec<u8> {
    format!("lin-key-{k}").into_bytes()
}

/// The value with id `id`: the id, then filler derived from it; mostly
/// under 6 KB, one in 16 between 16 and 64 KiB.
fn value(id: u64) -> Vec<u8> {
    let h = mix(id);
    let len = if h.is_multiple_of(16) {
        (16 << 10) + (h >> 8) as usize % (48 << 10)
    } else {
        (h >> 8) as usize % 6_000
    };
    let mut v = id.to_le_bytes().to_vec();
    v.extend((0..len).map(|i| (h >> 16) as u8 ^ i as u8));
    v
}

/// The id of a value read back, which must be byte for byte one that was
/// written.
fn id_of(bytes: &[u8]) -> u64 {
    let id = u64::from_le_bytes(bytes[..8].try_into().expect("at least 8 bytes"));
    assert!(
        bytes == value(id),
        "read {} bytes that no operation wrote (id field {id})",
        bytes.len()
    );
    id
}

/// One thread's operation stream, stamps and results.
struct Worker<'a> {
    db: &'a Db,
    clock: &'a AtomicU64,
    rng: Rng,
    next_id: u64,
    /// The value this thread last saw or wrote under each key: its
    /// compare-and-swap expectations.
    seen: [Option<u64>; KEYS],
    events: Vec<(usize, Event)>,
    bytes_written: usize,
}

impl Worker<'_> {
    fn stamp(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    /// A new value id: the round and thread in the high 32 bits, a
    /// sequence number in the low ones.
    fn fresh(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn step(&mut self) {
        let hot = self.rng.below(2) == 0;
        let k = if hot {
            self.rng.below(HOT_KEYS)
        } else {
            HOT_KEYS + self.rng.below(KEYS - HOT_KEYS)
        };
        // Per mille. About 2 writes per cold key per round, against some
        // 15 MiB written: most of the time a cold key's newest record is
        // older than the 4 MiB hot tier.
        let writes = if hot { 700 } else { 4 };
        if self.rng.below(1_000) >= writes {
            self.read(k);
            return;
        }
        let db = self.db;
        let key = key(k);
        match self.rng.below(10) {
            0..=2 => {
                let id = self.fresh();
                let v = value(id);
                self.bytes_written += v.len();
                let call = self.stamp();
                db.insert(&key, &v).expect("insert");
                self.record(k, call, Op::Insert(id));
                self.seen[k] = Some(id);
            }
            3 => {
                let call = self.stamp();
                let was = db.remove(&key).expect("remove");
                self.record(k, call, Op::Remove(was));
                self.seen[k] = None;
            }
            4 | 5 => {
                let new = self.fresh();
                let v = value(new);
                self.bytes_written += v.len();
                let mut prev = None;
                let call = self.stamp();
                let out = db
                    .update(&key, |old| {
                        prev = Some(old.map(id_of));
                        Some(v.clone())
                    })
                    .expect("update");
                let ret = self.stamp();
                assert_eq!(out.as_deref(), Some(&v[..]), "update's result");
                let prev = prev.expect("update ran its closure");
                self.events
                    .push((k, ev(call, ret, Op::Update { prev, new })));
                self.seen[k] = Some(new);
            }
            6 | 7 => {
                let expected = if self.rng.below(5) == 0 {
                    None
                } else {
                    self.seen[k]
                };
                let new = (self.rng.below(5) > 0).then(|| self.fresh());
                let (ev_bytes, new_bytes) = (expected.map(value), new.map(value));
                self.bytes_written += new_bytes.as_ref().map_or(0, Vec::len);
                let call = self.stamp();
                let swapped = db
                    .compare_and_swap(&key, ev_bytes.as_deref(), new_bytes.as_deref())
                    .expect("compare_and_swap");
                self.record(
                    k,
                    call,
                    Op::Cas {
                        expected,
                        new,
                        swapped,
                    },
                );
                if swapped {
                    self.seen[k] = new;
                }
            }
            _ => self.batch(k),
        }
    }

    fn read(&mut self, k: usize) {
        let key = key(k);
        if self.rng.below(5) == 0 {
            let call = self.stamp();
            let present = self.db.contains_key(&key).expect("contains_key");
            self.record(k, call, Op::Contains(present));
        } else {
            let call = self.stamp();
            let got = self.db.get(&key).expect("get");
            let ret = self.stamp();
            let got = got.as_deref().map(id_of);
            self.events.push((k, ev(call, ret, Op::Get(got))));
            self.seen[k] = got;
        }
    }

    /// A batch writing `k` and another of the hot keys: each an insert or
    /// a remove.
    fn batch(&mut self, k: usize) {
        let other = (k + 1 + self.rng.below(HOT_KEYS - 1)) % HOT_KEYS;
        let mut batch = WriteBatch::new();
        let mut ops = Vec::new();
        for k in [k, other] {
            if self.rng.below(4) == 0 {
                batch.remove(&key(k));
                ops.push((k, Op::Delete, None));
            } else {
                let id = self.fresh();
                let v = value(id);
                self.bytes_written += v.len();
                batch.insert(&key(k), &v);
                ops.push((k, Op::Insert(id), Some(id)));
            }
        }
        let call = self.stamp();
        self.db.apply_batch(&batch).expect("apply_batch");
        let ret = self.stamp();
        for (k, op, id) in ops {
            self.events.push((k, ev(call, ret, op)));
            self.seen[k] = id;
        }
    }

    /// Stamps the response of an operation invoked at `call`.
    fn record(&mut self, k: usize, call: u64, op: Op) {
        let ret = self.stamp();
        self.events.push((k, ev(call, ret, op)));
    }
}

/// What one round of threads did.
struct Round {
    events: Vec<(usize, Event)>,
    bytes_written: usize,
    compact_calls: u64,
}

fn run_round(db: &Db, clock: &AtomicU64, seed: u64, round: usize) -> Round {
    let writers_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let compactor = s.spawn(|| {
            let mut calls = 0;
            loop {
                let last = writers_done.load(Ordering::Acquire);
                db.compact().expect("compact");
                calls += 1;
                if last {
                    return calls;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut w = Worker {
                        db,
                        clock,
                        rng: Rng(mix(seed ^ ((round * THREADS + t) as u64) << 32)),
                        next_id: ((round * THREADS + t + 1) as u64) << 32,
                        seen: [None; KEYS],
                        events: Vec::new(),
                        bytes_written: 0,
                    };
                    for _ in 0..OPS_PER_THREAD {
                        w.step();
                    }
                    (w.events, w.bytes_written)
                })
            })
            .collect();
        let mut out = Round {
            events: Vec::new(),
            bytes_written: 0,
            compact_calls: 0,
        };
        for w in workers {
            let (events, bytes) = w.join().expect("worker panicked");
            out.events.extend(events);
            out.bytes_written += bytes;
        }
        writers_done.store(true, Ordering::Release);
        out.compact_calls = compactor.join().expect("compactor panicked");
        out
    })
}

fn reopen(dir: &Path, round: usize) -> Db {
    Db::open(dir, options(round)).expect("open")
}

#[test]
fn concurrent_operations_on_a_spilling_compacting_reopened_store_are_linearizable() {
    let seed = seed();
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = AtomicU64::new(1);
    let mut history: Vec<Vec<Event>> = vec![Vec::new(); KEYS];
    for round in 0..ROUNDS {
        let db = reopen(dir.path(), round);
        let r = run_round(&db, &clock, seed, round);
        let stats = db.stats().expect("stats");
        eprintln!(
            "round {round} (sync_writes {}): {} operations, {} KiB of values written, \
             {} compact calls, {} segments compacted",
            round % 2 == 1,
            r.events.len(),
            r.bytes_written >> 10,
            r.compact_calls,
            stats.compactions
        );
        // The workload must push records out of the hot tier and give
        // compaction work, or the test proves less than it claims.
        assert!(
            r.bytes_written > 2 * HOT_BYTES,
            "round {round}: too little written"
        );
        assert!(stats.compactions > 0, "round {round}: nothing compacted");
        for (k, e) in r.events {
            history[k].push(e);
        }
        db.close().expect("close");
        if round % 2 == 0 {
            // Replay the log itself at the next open.
            std::fs::remove_file(dir.path().join("CHECKPOINT")).expect("checkpoint written");
        }
    }
    // After the last reopen, every key once more.
    let db = reopen(dir.path(), 0);
    for (k, events) in history.iter_mut().enumerate() {
        let call = clock.fetch_add(1, Ordering::SeqCst);
        let got = db.get(&key(k)).expect("get").as_deref().map(id_of);
        let ret = clock.fetch_add(1, Ordering::SeqCst);
        events.push(ev(call, ret, Op::Get(got)));
    }
    db.close().expect("close");

    let all: Vec<Op> = history.iter().flatten().map(|e| e.op).collect();
    let count = |f: fn(&Op) -> bool| all.iter().filter(|op| f(op)).count();
    let variety = [
        (
            "reads of a value",
            count(|op| matches!(op, Op::Get(Some(_)))),
        ),
        ("reads of nothing", count(|op| matches!(op, Op::Get(None)))),
        ("removes that removed", count(|op| *op == Op::Remove(true))),
        ("removes of nothing", count(|op| *op == Op::Remove(false))),
        (
            "swaps",
            count(|op| matches!(op, Op::Cas { swapped: true, .. })),
        ),
        (
            "failed swaps",
            count(|op| matches!(op, Op::Cas { swapped: false, .. })),
        ),
        ("updates", count(|op| matches!(op, Op::Update { .. }))),
        ("batch removes", count(|op| *op == Op::Delete)),
    ];
    for (what, n) in variety {
        assert!(n > 0, "no {what} in the history: the check would be weaker");
    }
    let mut nodes = 0;
    for (k, events) in history.iter().enumerate() {
        match checker::check(None, events) {
            Ok(n) => nodes += n,
            Err(why) => panic!("key {k} (EMBERKV_LIN_SEED={seed}): {why}"),
        }
    }
    eprintln!(
        "linearizable: {} operations on {KEYS} keys ({} to {} per key), {nodes} search nodes; {variety:?}",
        all.len(),
        history.iter().map(Vec::len).min().unwrap_or(0),
        history.iter().map(Vec::len).max().unwrap_or(0),
    );
}
